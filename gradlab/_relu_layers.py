"""The ReLU layers of :mod:`gradlab.layers`: :class:`ReLUGradientActivation` and :class:`ReLUGradient`.

Private module; ``gradlab.layers`` exports both. They live below the public module because
``with_relu_gradient``'s surgery (``_relu_surgery``) builds them: ``gradlab.layers`` imports the surgery,
the surgery imports this module, and nothing here imports either (``make lint`` checks the layering
with import-linter; the contracts are in ``pyproject.toml``).
"""
from __future__ import annotations

import keras
import tensorflow as tf

from gradlab import _relu_sites
from gradlab import _validation as v
from gradlab._layer_base import GradientLayer, number

#: The backward rules of a ReLU that gradlab knows (see :class:`ReLUGradient`).
RULES = ("relu", "guided", "deconvnet", "leaky")


def check_rule(rule, alpha) -> float:
    """Checks a ReLU ``rule`` and its leaky slope ``alpha``; returns ``alpha`` as a Python float.

    Raises:
      TypeError: ``rule`` is not a string, or ``alpha`` not a number known now.
      ValueError: ``rule`` is not one of :data:`RULES`, or ``alpha`` is not finite.
    """
    if not isinstance(rule, str):
        raise TypeError(f"rule must be one of {', '.join(map(repr, RULES))}; got {v.describe(rule)}.")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, RULES))}; got {rule!r}.")
    return number(alpha, "alpha")


@keras.saving.register_keras_serializable(package="gradlab")
class ReLUGradientActivation:
    """The activation function of :class:`ReLUGradient`: ``max(x, 0)`` forward, ``rule`` backward.

    What :func:`with_relu_gradient` puts in ``activation=`` of ``Dense``, ``Conv2D``... It is
    registered serializable, so the rule survives ``model.save("m.keras")`` + ``load_model``.

    Args:
      rule: one of ``"relu"``, ``"guided"``, ``"deconvnet"``, ``"leaky"`` (see :class:`ReLUGradient`).
      alpha: the slope of the leaky gradient where ``x <= 0`` (used by ``"leaky"`` only).

    Example:
      >>> import keras, gradlab
      >>> relu = gradlab.layers.ReLUGradientActivation("deconvnet")
      >>> keras.layers.Dense(2, activation=relu).get_config()["activation"]["config"]
      {'rule': 'deconvnet', 'alpha': 0.01}
    """

    def __init__(self, rule: str = "guided", alpha: float = 0.01):
        self.rule, self.alpha = rule, check_rule(rule, alpha)

    def _backward(self, x, dy):
        dy = tf.convert_to_tensor(dy)  # an IndexedSlices upstream (tf.gather) is summed first
        zero = tf.zeros_like(dy)
        if self.rule == "relu":      # the true derivative: dy where x > 0
            return tf.where(x > 0, dy, zero)
        if self.rule == "guided":    # guided backpropagation: also only positive dy
            return tf.where((x > 0) & (dy > 0), dy, zero)
        if self.rule == "deconvnet":  # the deconvnet rule: ReLU applied to dy, whatever x was
            return tf.nn.relu(dy)
        # leaky gradient; tf.constant rounds the Python float once to dy's dtype (tf.cast would
        # make a float32 constant first: a float64 gradient got 0.10000000149 * dy for alpha 0.1)
        return tf.where(x > 0, dy, tf.constant(self.alpha, dy.dtype) * dy)

    def __call__(self, x):
        @tf.custom_gradient
        def relu(t):   # the op's name tells with_relu_gradient's check this ReLU follows the rule
            return tf.nn.relu(t, name=_relu_sites.marker(self.rule)), lambda dy: self._backward(t, dy)
        return relu(x)

    def get_config(self) -> dict:
        return {"rule": self.rule, "alpha": self.alpha}

    @classmethod
    def from_config(cls, config: dict) -> "ReLUGradientActivation":
        return cls(**config)

    def __repr__(self) -> str:
        return f"ReLUGradientActivation(rule={self.rule!r}, alpha={self.alpha!r})"


@keras.saving.register_keras_serializable(package="gradlab")
class ReLUGradient(GradientLayer):
    """A ReLU, ``max(x, 0)``, whose backward pass follows ``rule`` (forward bitwise ``keras.layers.ReLU()``).

    ::

        forward:   y = max(x, 0)
        backward:  "relu":      dL/dx = dy · 1[x > 0]          (the true derivative)
                   "guided":    dL/dx = dy · 1[x > 0] · 1[dy > 0]
                   "deconvnet": dL/dx = max(dy, 0)
                   "leaky":     dL/dx = dy · (1 if x > 0 else alpha)

    Args:
      rule: one of ``"relu"``, ``"guided"``, ``"deconvnet"``, ``"leaky"``.
      alpha: the slope of the leaky gradient where ``x <= 0`` (used by ``"leaky"`` only).
      **kwargs: standard Keras layer arguments.

    Example:
      >>> import tensorflow as tf, gradlab
      >>> x = tf.constant([-1.0, 2.0])
      >>> with tf.GradientTape() as tape:
      ...     tape.watch(x)
      ...     y = gradlab.layers.ReLUGradient("leaky", alpha=0.1)(x)
      >>> tape.gradient(y, x).numpy()
      array([0.1, 1. ], dtype=float32)
    """

    def __init__(self, rule: str = "guided", alpha: float = 0.01, **kwargs):
        super().__init__(**kwargs)
        self._set_rule(rule, alpha)

    def _set_rule(self, rule: str, alpha: float) -> None:
        """Backpropagates ``rule`` from now on (with_relu_gradient retargets a copy); the config follows."""
        self._relu = ReLUGradientActivation(rule, alpha)
        self.rule, self.alpha = rule, self._relu.alpha

    def call(self, inputs):
        return self._relu(inputs)

    def get_config(self):
        return {**super().get_config(), "rule": self.rule, "alpha": self.alpha}
