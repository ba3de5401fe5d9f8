"""gradlab's finite differences agree with TensorFlow's own, ``tf.test.compute_gradient``.

check_gradient takes its own central differences (``gradlab._finite_differences``) for what
``compute_gradient`` does not give: the noise floor of each value, two-direction fast mode, the
widest dtype ``fn`` accepts. Where both apply they must agree; where the step cannot be taken
exactly, gradlab divides by the step actually taken and TensorFlow by the nominal one.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from gradlab import _finite_differences as fd

FUNCTIONS = {
    "sin": tf.sin,
    "cube": lambda t: t**3,
    "softplus": tf.nn.softplus,
    "product": lambda t: t * tf.reverse(t, [0]),  # every element's derivative reads another element
}


def tensorflow_differences(fn, x: np.ndarray, delta: float) -> np.ndarray:
    """dL/dx of ``L = sum(fn(x))`` by ``tf.test.compute_gradient``'s numeric Jacobian."""
    _, numeric = tf.test.compute_gradient(lambda t: tf.reduce_sum(fn(t)), [tf.constant(x)], delta=delta)
    return numeric[0].reshape(x.shape)


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("delta", [None, 1e-3])
def test_full_differences_equal_tensorflows(name, delta):
    fn = FUNCTIONS[name]
    x = np.array([-1.5, -0.3, 0.0, 0.7, 2.0], np.float64)
    ours = fd.finite_differences(lambda t: tf.cast(fn(t), tf.float64), tf.constant(x), tf.float64, delta, None)
    theirs = tensorflow_differences(fn, x, fd.DEFAULT_DELTA if delta is None else delta)
    np.testing.assert_allclose(ours.values, theirs, rtol=1e-9, atol=1e-12)


def test_where_the_step_rounds_only_the_step_actually_taken_gives_the_derivative():
    # In float32 the numbers in [2**14, 2**15) are 2**-9 apart. At an odd multiple of 2**-9, both
    # x + 1/1024 and x - 1/1024 fall halfway between two neighbours and round to the even one:
    # the step taken is 4/1024, twice the nominal 2/1024.
    fn = lambda t: 0.5 * tf.cast(t, tf.float64) ** 2  # noqa: E731   dL/dx = x, evaluated exactly
    x = np.array([2**14 + 2**-9, 20000 + 3 * 2**-9, 30000 + 5 * 2**-9], np.float32)
    ours = fd.finite_differences(fn, tf.constant(x), tf.float32, None, None)
    np.testing.assert_allclose(ours.values, x, rtol=1e-12)
    theirs = tensorflow_differences(fn, x, fd.DEFAULT_DELTA)
    np.testing.assert_allclose(theirs, 2 * x, rtol=1e-6)  # TensorFlow divides by the nominal 2/1024
