"""Self-checks for notebook 07 (optimizer-level changes)."""
from __future__ import annotations

import re

import keras
import numpy as np
import tensorflow as tf

from exercises._harness import NotYet, first_hint, running, self_check
from exercises._i18n import _

__all__ = ["check_exercise_1", "check_exercise_2"]

# Global norm 13 (halved by max_norm 6.5), global norm 26 (divided by 10 by max_norm 2.6: a max_norm
# written into the answer fails here, and 6.5 is named), then global norm 1.3 (left alone by max_norm 2).
_CASES = (
    ([[3.0, 4.0], [[0.0, 12.0]]], 6.5),
    ([[6.0, 8.0], [[0.0, 24.0]]], 2.6),
    ([[0.3, 0.4], [[0.0, 1.2]]], 2.0),
)


def _held_out_cases(seed: int) -> tuple:
    """Three cases as the public ones (clipped, clipped with another max_norm, left alone), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    cases = []
    for low, high in ((0.3, 0.7), (0.1, 0.25), (1.3, 3.0)):
        values = [np.round(rng.uniform(-3.0, 3.0, 2), 2).tolist(), np.round(rng.uniform(-3.0, 3.0, (1, 2)), 2).tolist()]
        norm = float(np.sqrt(sum(np.sum(np.square(v)) for v in values)))
        cases.append((values, max(round(norm * float(rng.uniform(low, high)), 2), 0.01)))   # never 0
    return tuple(cases)
#: The name scopes of tf.clip_by_global_norm and tf.linalg.global_norm (tf.global_norm) in a graph.
_LIBRARY_SCOPE = re.compile(r"(?:^|/)(clip_by_global_norm|global_norm)(?:_\d+)?/")


def _as_tensors(result) -> list:
    return [tf.convert_to_tensor(r, tf.float32) for r in result]


def _close(result, expected) -> bool:
    return all(np.allclose(r, e, rtol=1e-5, atol=1e-6) for r, e in zip(result, expected))


def _library_calls(fn, grads, max_norm) -> set:
    """Which of tf.clip_by_global_norm / tf.linalg.global_norm ``fn`` calls, from a traced graph.

    An answer that cannot be traced (one that calls ``.numpy()``, say) gives no evidence: empty set.
    """
    specs = [tf.TensorSpec.from_tensor(g) for g in grads]
    try:
        traced = tf.function(lambda gs: fn(list(gs), max_norm), autograph=False)
        graph = traced.get_concrete_function(specs).graph
    except Exception:  # an eager-only answer: it passed the numbers, nothing to refuse it on
        return set()
    found = set()
    for op in graph.get_operations():
        match = _LIBRARY_SCOPE.search(op.name + "/")
        if match:
            found.add("tf.clip_by_global_norm" if match.group(1) == "clip_by_global_norm"
                      else "tf.linalg.global_norm")
    if "tf.clip_by_global_norm" in found:  # it calls tf.linalg.global_norm itself: name only the call made
        found.discard("tf.linalg.global_norm")
    return found


def _shown(tensors) -> str:
    return str([np.round(t.numpy().astype(np.float64), 4).tolist() for t in tensors])


def _hint(result, grads, max_norm, tried=(), written_above=None) -> str:
    """Names the typical mistake behind a wrong result (never the code of the answer); ``tried`` holds
    max_norm values an answer may have written in (the public cases' and this run's earlier ones), and
    ``written_above`` one of them above the global norm that the answer clips to (see :func:`_clips_to`)."""
    squares = sum(float(tf.reduce_sum(g * g)) for g in grads)
    norm = squares ** 0.5
    if _close(result, [tf.clip_by_norm(g, max_norm) for g in grads]):
        norms = ", ".join(f"{float(tf.norm(g)):.1f}" for g in grads)
        return _("that is per-variable clipping: each tensor is clipped on its own (norms {norms}),\n"
                 "which turns the direction. Use one factor for all tensors, computed from the global\n"
                 "norm sqrt(sum of all squares) = {norm:.1f}.").format(norms=norms, norm=norm)
    flat_g = np.concatenate([g.numpy().ravel() for g in grads])
    flat_r = np.concatenate([r.numpy().ravel() for r in result])
    nonzero = flat_g != 0
    ratios = flat_r[nonzero] / flat_g[nonzero]
    if not np.allclose(flat_r[~nonzero], 0.0) or not np.allclose(ratios, ratios[0], rtol=1e-5):
        return _("multiply every tensor by the same factor min(1, max_norm / global norm).")
    factor, expected = float(ratios[0]), min(1.0, max_norm / norm)
    said = _("you multiplied every tensor by {factor:.4f}; the factor is min(1, {max_norm} / {norm:.1f}) = "
             "{expected:.4f}").format(factor=factor, max_norm=max_norm, norm=norm, expected=expected)
    written = [m for m in tried if m != max_norm and m < norm and np.isclose(factor, m / norm)]
    if written:
        return _("{said}:\nthat is the factor for max_norm {written}, not this case's {max_norm}. Is "
                 "{written} written into your\nfunction? Use the max_norm it is given.").format(
            said=said, written=written[0], max_norm=max_norm)
    if np.isclose(factor, 1.0):
        return _("{said}:\nthe global norm {norm:.1f} is above max_norm, so the gradients must shrink.").format(
            said=said, norm=norm) + (
            _(" On the same gradients scaled up, your\nfunction clips to max_norm {written}, not {max_norm}: is "
              "{written} written into your function?").format(written=written_above, max_norm=max_norm)
            if written_above else "")
    if np.isclose(factor, max_norm / norm):
        return _("{said}:\nthe global norm {norm:.1f} is below max_norm, so the gradients stay as they are. "
                 "Did you forget the min(1, ...)?").format(said=said, norm=norm)
    if np.isclose(factor, min(1.0, max_norm / squares)):
        return _("{said}.\nYou divided by the sum of squares, {squares:.2f}: the global norm is its square "
                 "root.").format(said=said, squares=squares)
    per_tensor = sum(float(tf.norm(g)) for g in grads)
    if np.isclose(factor, min(1.0, max_norm / per_tensor)):
        return _("{said}.\nYou added the tensors' norms ({per_tensor:.1f}): the global norm is the square "
                 "root of the sum of\nall squares, over all tensors.").format(said=said, per_tensor=per_tensor)
    if np.isclose(factor, norm / max_norm):  # min(1, norm / max_norm) = 1 returned above
        return _("{said}:\nthe ratio is upside down (global norm / max_norm).").format(said=said)
    return _("{said}.").format(said=said)


def _clips_to(fn, grads, max_norm, tried) -> float | None:
    """A max_norm from ``tried`` (not ``max_norm``) that ``fn`` clips to, found on ``grads`` scaled above
    all of them: an answer that leaves gradients below a written-in max_norm alone shows it; else None."""
    norm = float(tf.linalg.global_norm(grads))
    scale = 2.0 * max(tried + [max_norm]) / norm
    try:
        result = _as_tensors(fn([g * scale for g in grads], max_norm))
    except Exception:  # noqa: BLE001  (a probe only: the check's own run reports errors)
        return None
    for m in tried:
        if m != max_norm and m >= norm and _close(result, tf.clip_by_global_norm([g * scale for g in grads], m)[0]):
            return m
    return None


@self_check
def check_exercise_1(fn, *, seed: int | None = None) -> str:
    """Checks ``fn(grads, max_norm)``, global-norm clipping written by hand, above and below ``max_norm``.

    The right answer multiplies every gradient by one factor, ``min(1, max_norm / global_norm)``
    with ``global_norm = sqrt(sum of the squares of all elements of all tensors)``, computed without
    ``tf.clip_by_global_norm`` or ``tf.linalg.global_norm`` (the exercise asks for it by hand; a
    traced graph shows their name scopes). Per-variable clipping, a missing ``min``, a missing
    square root, a sum of per-tensor norms and a max_norm written into the answer are recognised and
    explained. With ``seed`` (the instructor edition's held-out cases) it tries gradients and max_norm
    values drawn from it instead.
    """
    cases = _CASES if seed is None else _held_out_cases(seed)
    for number, (values, max_norm) in enumerate(cases):
        grads = [tf.constant(v) for v in values]
        with running(_("your function on gradients {values}, max_norm {max_norm}").format(
                values=values, max_norm=max_norm)):
            result = fn(list(grads), max_norm)
            result = None if result is None else _as_tensors(result)
        if result is None:
            raise NotYet(_("your function returned None: return the list of clipped gradients."))
        expected = tf.clip_by_global_norm(grads, max_norm)[0]
        if len(result) != len(expected) or any(r.shape != e.shape for r, e in zip(result, expected)):
            raise NotYet(_("return one tensor per gradient, each with its gradient's shape: for shapes "
                           "{shapes}\nyou returned {got}.").format(
                shapes=[tuple(g.shape) for g in grads], got=[tuple(r.shape) for r in result]))
        if _close(result, expected):
            continue
        norm = float(tf.linalg.global_norm(grads))
        tried = [m for _, m in (*_CASES, *cases[:number])]
        raise NotYet(_("for gradients {values} (global norm {norm:.1f}) and max_norm {max_norm} you return\n"
                       "{got}, expected {expected}.\nHint: {hint}").format(
            values=values, norm=norm, max_norm=max_norm, got=_shown(result), expected=_shown(expected),
            hint=_hint(result, grads, max_norm, tried, _clips_to(fn, grads, max_norm, tried))))
    used = _library_calls(fn, [tf.constant(v) for v in cases[0][0]], cases[0][1])
    if used:
        raise NotYet(_("the numbers are right, but your function calls {calls}.\n"
                       "The exercise asks you to compute the global norm and the factor yourself, from the\n"
                       "squares of the gradients' elements.").format(calls=_(" and ").join(sorted(used))))
    if seed is not None:
        return _("One factor min(1, max_norm / global norm) for every tensor, for every case tried.")
    return _("One factor min(1, max_norm / global norm) for every tensor: gradients with global\n"
             "norm 13 were halved by max_norm 6.5, those with global norm 1.3 left alone by max_norm 2.")


def _probe_variables(inputs: int, out_units: int) -> list:
    """The trainable variables of notebook 07's model shape: 'hidden' Dense(4), then 'out' Dense(out_units)."""
    x = keras.Input((inputs,))
    hidden = keras.layers.Dense(4, activation="tanh", name="hidden")(x)
    return keras.Model(x, keras.layers.Dense(out_units, name="out")(hidden)).trainable_variables


def _one_probe(transform, variables, setting: str, scales=(1.0, 2.0, 3.0, 4.0)) -> None:
    """Runs ``transform`` on gradients ``scales`` (1, 2, 3, 4) times ones; ``setting`` opens a message ("" for the first)."""
    grads = [tf.ones_like(v) * scale for scale, v in zip(scales, variables)]
    with running(setting + _("your transform")):
        result = transform(list(grads), list(variables))
        result = None if result is None else _as_tensors(result)
    if result is None:
        raise NotYet(_("your transform returned None: return the list of gradients, one per variable."))
    if len(result) != len(grads):
        raise NotYet(setting + _("return one gradient per variable ({count}); you returned {got}.").format(
            count=len(grads), got=len(result)))
    for variable, grad, got in zip(variables, grads, result):
        if got.shape != grad.shape:
            raise NotYet(setting + _("the gradient of {path} has shape {shape}; you returned shape {got}.").format(
                path=variable.path, shape=tuple(grad.shape), got=tuple(got.shape)))
    asked = [v.path for v in variables if v.path.startswith("hidden/")]
    changed = [v.path for v, grad, got in zip(variables, grads, result) if not np.allclose(got.numpy(), grad.numpy())]
    extra = [path for path in changed if path not in asked]
    for variable, grad, got in zip(variables, grads, result):
        factor = 0.1 if variable.path.startswith("hidden/") else 1.0
        if not np.allclose(got.numpy(), factor * grad.numpy()):
            ratio = float(np.mean(got.numpy() / grad.numpy()))
            hint = first_hint(
                (setting, _("It passed in the notebook's model:\ndoes your transform go by position or by shape? "
                            "Tell the layers apart by variable.path.")),
                (extra and len(changed) == len(variables),
                 _("Your transform changed every gradient: those of {paths} should stay\nas they are. Only the "
                   "hidden layer is slowed down: tell the layers apart by variable.path.").format(
                     paths=_(" and ").join(extra))),
                (bool(extra),
                 _("Your transform changed the gradients of {paths}, which should stay as they\nare. Only the "
                   "hidden layer is slowed down: tell the layers apart by variable.path.").format(
                     paths=_(" and ").join(extra))),
                (factor == 0.1 and np.isclose(ratio, 1.0) and variable.path.endswith("bias") and bool(changed),
                 _("The bias is part of the hidden layer too: select by the layer's part of variable.path.")),
                (sorted(changed) == sorted(asked),
                 _("The right variables are scaled, by the wrong factor: the exercise asks for 0.1.")),
                (not changed,  # the starting point: nothing slowed down
                 _("Which attribute of a variable says it belongs to the hidden layer? Section 1\n"
                   "prints it for each variable.")),
                otherwise=_("Tell the layers apart by variable.path."),
            )
            raise NotYet(setting + _("the gradient of {path} should be multiplied by {factor}, but it was\n"
                                     "multiplied by {ratio:.2f}. {hint}").format(
                path=variable.path, factor=factor, ratio=ratio, hint=hint))


@self_check
def check_exercise_2(transform, *, seed: int | None = None) -> str:
    """Checks that ``transform(grads, variables)`` multiplies the 'hidden' layer's gradients by 0.1 only.

    The gradients are ``1, 2, 3, 4`` times ones for ``hidden/kernel``, ``hidden/bias``,
    ``out/kernel`` and ``out/bias``; the answer must return ``0.1`` times the first two and the
    last two unchanged, as a list with one gradient per variable. A second model has the layers'
    variables in the other order and of equal shapes, so only an answer that reads
    ``variable.path`` passes (not one that goes by position or by shape). With ``seed`` (the
    instructor edition's held-out cases) it tries one model of other sizes instead, its variables in
    an order and with gradients drawn from it.
    """
    if seed is not None:
        rng = np.random.default_rng(seed)
        variables = _probe_variables(int(rng.integers(5, 9)), int(rng.integers(2, 7)))
        _one_probe(transform, [variables[i] for i in rng.permutation(4)], "",
                   np.round(rng.uniform(0.5, 4.0, 4), 2).tolist())
        return _("hidden/kernel and hidden/bias get 0.1 of their gradient, out/kernel and out/bias all of it.")
    _one_probe(transform, _probe_variables(3, 1), "")
    _one_probe(transform, _probe_variables(4, 4)[::-1],
               _("with the variables in another order (out/ first) and both kernels 4 x 4,\n"))
    return _("hidden/kernel and hidden/bias get 0.1 of their gradient, out/kernel and out/bias all of it.\n"
             "(With SGD this is a 10 times smaller learning rate for the hidden layer.)")
