"""Sparse upstream gradients: every op gives the gradient it gives for the same dense upstream.

When an op's output is read by ``tf.gather`` (or a Keras ``Embedding``), the gradient that reaches
the op is a ``tf.IndexedSlices``; a repeated index contributes several slices that add up. The
contract of each op is stated on the summed gradient, so the result must equal the dense case:
scaling the slices one by one is exact, clipping them one by one is not.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import gradlab

#: Rows 1 and 3 are read twice, row 0 never: repeated indices are the case that goes wrong when a
#: non-linear rule is applied slice by slice.
INDICES = [1, 3, 1, 2, 3, 3]
TABLE = np.arange(12, dtype=np.float32).reshape(4, 3) / 4.0
WEIGHTS = np.linspace(-2.0, 3.0, 18, dtype=np.float32).reshape(6, 3)


def _loss(rows: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(rows * WEIGHTS)


def _gradient(apply, x: tf.Tensor, sparse: bool) -> tuple[np.ndarray, type]:
    """d loss / d x through ``apply``, reading the op's output with gather (sparse) or a one-hot
    matmul (the same rows, but a dense upstream gradient)."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = apply(x)
        if sparse:
            rows = tf.gather(y, INDICES)
        else:
            rows = tf.one_hot(INDICES, TABLE.shape[0], dtype=y.dtype) @ y
        loss = _loss(rows)
    grad = tape.gradient(loss, x)
    dense = tf.convert_to_tensor(grad)
    return (dense.numpy() if tf.executing_eagerly() else dense), type(grad)


def test_the_gather_path_really_sends_indexed_slices_upstream():
    x = tf.constant(TABLE)
    _, kind = _gradient(tf.identity, x, sparse=True)
    assert kind is tf.IndexedSlices


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_every_op_gives_the_dense_gradient_for_a_sparse_upstream(op_case, mode):
    x = tf.constant(TABLE)

    def both(t):
        return _gradient(op_case.apply, t, False)[0], _gradient(op_case.apply, t, True)[0]

    if mode == "function":
        both = tf.function(both)
    dense, sparse = (np.asarray(g) for g in both(x))
    np.testing.assert_allclose(sparse, dense, rtol=1e-6, atol=1e-6)
    # ... and the gradient is the op's contract applied to the summed upstream gradient.
    summed = np.zeros_like(TABLE)
    np.add.at(summed, INDICES, WEIGHTS)
    np.testing.assert_allclose(dense, op_case.gradient(TABLE.astype(np.float64), summed), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["scale_gradient", "reverse_gradient"])
def test_a_scale_keeps_the_sparse_form(op):
    x = tf.constant(TABLE)
    apply = {"scale_gradient": lambda t: gradlab.scale_gradient(t, 2.0),
             "reverse_gradient": lambda t: gradlab.reverse_gradient(t, 2.0)}[op]
    _, kind = _gradient(apply, x, sparse=True)
    assert kind is tf.IndexedSlices


def test_clips_are_not_applied_slice_by_slice():
    """The bug this file guards against: clipping each slice gives another answer than clipping
    the sum when an index repeats."""
    x = tf.constant(TABLE)
    grad, _ = _gradient(lambda t: gradlab.clip_gradient(t, -1.0, 1.0), x, sparse=True)
    summed = np.zeros_like(TABLE)
    np.add.at(summed, INDICES, WEIGHTS)
    per_slice = np.zeros_like(TABLE)
    np.add.at(per_slice, INDICES, np.clip(WEIGHTS, -1.0, 1.0))
    np.testing.assert_array_equal(grad, np.clip(summed, -1.0, 1.0))
    assert not np.allclose(grad, per_slice)


def test_map_gradient_fn_receives_a_dense_tensor():
    seen = []

    def fn(dy):
        seen.append(type(dy))
        return dy * dy

    x = tf.constant(TABLE)
    grad, _ = _gradient(lambda t: gradlab.map_gradient(t, fn), x, sparse=True)
    summed = np.zeros_like(TABLE)
    np.add.at(summed, INDICES, WEIGHTS)
    assert seen and all(not issubclass(kind, tf.IndexedSlices) for kind in seen)
    np.testing.assert_allclose(grad, summed * summed, rtol=1e-6)


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("layer_name", ["ScaleGradient", "ClipGradient", "ClipGradientNorm", "GradientReversal"])
def test_layers_on_an_embedding_table_match_the_dense_gradient(layer_name, mode):
    """An embedding table passed through a gradlab layer, then looked up with repeated ids (the
    lookup sends IndexedSlices back): the table's gradient equals the one of a dense lookup."""
    import keras

    layers = gradlab.layers
    layer = {"ScaleGradient": lambda: layers.ScaleGradient(-0.5),
             "ClipGradient": lambda: layers.ClipGradient(-0.3, 0.3),
             "ClipGradientNorm": lambda: layers.ClipGradientNorm(1.0),
             "GradientReversal": lambda: layers.GradientReversal(0.5)}[layer_name]()
    embedding = keras.layers.Embedding(4, 3)
    embedding.build((None,))
    embedding.embeddings.assign(TABLE)

    def gradients():
        result = []
        for lookup in (lambda table: tf.gather(table, INDICES),
                       lambda table: tf.one_hot(INDICES, 4) @ table):
            with tf.GradientTape() as tape:
                loss = _loss(lookup(layer(embedding.embeddings)))
            result.append(tf.convert_to_tensor(tape.gradient(loss, embedding.embeddings)))
        return result

    if mode == "function":
        gradients = tf.function(gradients)
    sparse, dense = (np.asarray(g) for g in gradients())
    np.testing.assert_allclose(sparse, dense, rtol=1e-6, atol=1e-6)
