"""The one harness every self-check runs on: run the learner's code, report one verdict, confirm a solution.

A check is a function decorated with :func:`self_check`. Its body runs the learner's code inside
:func:`running` (any exception becomes a "Not yet" that names it, in one line), raises
:class:`NotYet` with what to fix when the answer is wrong, and returns what was shown when it is
right. The decorator prints exactly one verdict, ``Not yet: ...`` or ``Correct! ...``, and returns a
:class:`Verdict`: true or false, but not echoed as a bare ``True``/``False`` under the cell.

A solution cell calls ``check_exercise_N.confirm(answer)`` instead: it runs the same check, prints
only that the solution passes (the verdict states the answer, and JupyterLab shows a solution's
output once it has run), and raises ``AssertionError`` if the solution fails, so CI notices.
"""
from __future__ import annotations

import contextlib
import functools
import io
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from exercises._i18n import _

__all__ = ["NotYet", "Verdict", "self_check", "running", "first_line", "first_hint", "shown",
           "custom_gradient_ops", "GradientRule", "gradient_rules"]


class NotYet(Exception):
    """Raised by a check's body: the answer is not right yet; the message says what to fix."""


class Verdict:
    """A check's outcome: ``bool(verdict)`` is whether it passed, ``verdict.message`` what was printed.

    It is not echoed under the cell (``_ipython_display_`` shows nothing: the message is printed
    already), so a check called last in a cell leaves no bare ``True``/``False`` behind.

    Example:
      >>> verdict = Verdict(False, "Not yet: return x.")
      >>> bool(verdict), verdict.passed
      (False, False)
    """

    __slots__ = ("passed", "message")

    def __init__(self, passed: bool, message: str) -> None:
        self.passed = bool(passed)
        self.message = message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:  # the verdict is printed already
        return None


def shown(values: Any, precision: int = 4, *, width: int = 75) -> str:
    """An array as a verdict prints it: ``precision`` decimals at most, comma-separated, no negative zero.

    ``-0.0`` prints as ``0.``: which of two equal zeros a computation keeps can depend on the CPU,
    and a ``-0.`` in a message only puzzles.

    Example:
      >>> shown([0.5, -0.0, -1.23456])
      '[ 0.5   ,  0.    , -1.2346]'
    """
    return np.array2string(np.asarray(values) + 0.0, precision=precision, floatmode="maxprec", separator=", ",
                           max_line_width=width)


def first_line(error: BaseException, *, last: bool = False, limit: int = 160) -> str:
    """``"TypeName: first line of the message"`` (or its last line), safe for an empty message.

    Args:
      error: the exception the learner's code raised.
      last: take the message's last line instead (TensorFlow graph errors end with the cause).
      limit: at most this many characters of the message; a longer one is cut at a word
        boundary (if there is one) and ends with "...".

    Example:
      >>> first_line(ValueError("bad shape\\nmore"))
      'ValueError: bad shape'
      >>> first_line(KeyError())
      'KeyError'
    """
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    text = (lines[-1] if last else lines[0]).strip()
    if len(text) > limit:
        cut = text[:limit]
        text = (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "..."
    return f"{type(error).__name__}: {text}"


def first_hint(*mistakes: tuple[Any, str], otherwise: str) -> str:
    """The hint of the first typical mistake the answer shows, or ``otherwise``.

    A check lists the mistakes it recognises as ``(shows_it, hint)`` pairs, most specific first.
    Every ``shows_it`` is computed before the lookup, so each must be safe to compute for any
    answer that reached this point.

    Example:
      >>> got = 2.0
      >>> first_hint((got == 1.0, "dy unchanged"), (got == 2.0, "dy twice"), otherwise="not the rule")
      'dy twice'
    """
    return next((hint for shows_it, hint in mistakes if shows_it), otherwise)


@contextlib.contextmanager
def running(what: str | None = None, *, last: bool = False, hint: str = "") -> Iterator[None]:
    """Runs the learner's code: an exception it raises becomes ``NotYet("<what> raised <Type: line>")``.

    Args:
      what: what is being run, as the message should name it (``"scale_and_clip(x, 3.0, 1.0)"``; default
        "your function", in the learner's language).
      last: name the error by the last line of its message (TensorFlow graph errors end with the cause).
      hint: what to try, added after the error (a leading newline puts it on a line of its own).

    Example:
      >>> try:
      ...     with running("f(0)"):
      ...         1 / 0
      ... except NotYet as not_yet:
      ...     print(not_yet)
      f(0) raised ZeroDivisionError: division by zero
    """
    try:
        yield
    except NotYet:
        raise
    except Exception as error:  # a learner's code may raise anything: report it, never crash
        separator = "" if not hint or hint.startswith("\n") else " "
        what = _("your function") if what is None else what
        # The error itself stays in English (TensorFlow's and gradlab's messages are English).
        raised = _CJK_SPACE.sub("", _("{what} raised {error}").format(what=what, error=first_line(error, last=last)))
        raise NotYet(f"{raised}.{separator}{hint}" if hint else raised) from error


#: A space between two Chinese characters (or before a full-width parenthesis), left where a translated template
#: joins a translated piece ("你的函数" + " 抛出了异常"); Chinese runs on without one (and keeps it beside Latin
#: text and code).
_CJK_SPACE = re.compile(r"(?<=[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]) (?=[\u4e00-\u9fff\uff08])")


def _not_yet(message: str) -> str:
    # "Not yet (setting): ..." reads better than "Not yet: (setting) ..." when a check names a setting.
    # A translation may open the setting with a full-width parenthesis: "还不对（…）：…".
    if message.startswith(("(", "\uff08")):
        return _CJK_SPACE.sub("", _("Not yet ") + message)
    return _("Not yet: ") + message


class SelfCheck:
    """A check built by :func:`self_check`: call it on an answer, or ``.confirm`` a solution."""

    def __init__(self, body: Callable[..., str]) -> None:
        functools.update_wrapper(self, body)
        self._body = body

    def verdict(self, *args: Any, **kwargs: Any) -> Verdict:
        """Runs the check and returns its verdict without printing it."""
        try:
            shown = self._body(*args, **kwargs)
        except NotYet as not_yet:
            return Verdict(False, _not_yet(str(not_yet)))
        return Verdict(True, _("Correct! ") + shown)

    def __call__(self, *args: Any, **kwargs: Any) -> Verdict:
        verdict = self.verdict(*args, **kwargs)
        print(verdict.message)
        return verdict

    def confirm(self, *args: Any, **kwargs: Any) -> None:
        """Runs the check on a solution and says only that it passes (raises ``AssertionError`` if not).

        Anything the learner's code prints while it is checked is swallowed too: it would show values.
        """
        with contextlib.redirect_stdout(io.StringIO()):
            verdict = self.verdict(*args, **kwargs)
        if not verdict:
            raise AssertionError(f"the solution fails {self.__name__}: {verdict.message}")
        print(_("This solution passes {check}.").format(check=self.__name__))

    def __repr__(self) -> str:
        return f"<self-check {self.__name__}>"


def self_check(body: Callable[..., str]) -> SelfCheck:
    """Makes a check from a body that raises :class:`NotYet` or returns the text shown after "Correct!".

    Example:
      >>> @self_check
      ... def check_exercise_1(answer):
      ...     '''Checks that the answer is 2.'''
      ...     if answer != 2:
      ...         raise NotYet(f"{answer} is not it.")
      ...     return "2 it is."
      >>> verdict = check_exercise_1(3)
      Not yet: 3 is not it.
      >>> check_exercise_1.confirm(2)
      This solution passes check_exercise_1.
    """
    return SelfCheck(body)


class GradientRule(NamedTuple):
    """One op of a traced graph whose gradient is replaced (see :func:`gradient_rules`)."""

    op_type: str  #: ``"IdentityN"`` for ``tf.custom_gradient``; the op's own type under an override map
    name: str     #: the registered rule's name (``"CustomGradient-12"``, ``"GuidedRelu"``)
    origin: str   #: the module of the Python function that computes the gradient, or ""


def _rule_origin(name: str) -> str:
    """The module of the first non-TensorFlow function behind the registered gradient ``name``.

    ``tf.custom_gradient`` registers a TensorFlow wrapper that calls the ``grad`` it was given; the
    wrappers' closures are followed to that ``grad``: ``"gradlab.ops"`` for gradlab's ops,
    ``"__main__"`` for a notebook's own. "" if TensorFlow's registry cannot be read.
    """
    try:
        from tensorflow.python.framework import ops as tf_ops  # the registry has no public reader
        queue = [tf_ops._gradient_registry.lookup(name)]
    except Exception:  # another TensorFlow layout, or a name that is not registered
        return ""
    seen = set()
    while queue:
        function = queue.pop(0)
        if id(function) in seen:
            continue
        seen.add(id(function))
        module = getattr(function, "__module__", None) or ""
        if not module.startswith("tensorflow"):
            return module
        for cell in getattr(function, "__closure__", None) or ():
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(content) and hasattr(content, "__code__"):
                queue.append(content)
    return ""


def gradient_rules(fn: Callable[..., Any], *args: Any) -> list[GradientRule]:
    """Every op of the graph ``fn(*args)`` builds whose gradient is replaced, found by tracing it.

    It searches the graphs of nested ``tf.function`` calls and control-flow branches too (a
    ``@tf.function`` answer builds its ops there), and says which op carries the rule
    (``IdentityN`` for ``tf.custom_gradient`` and everything built on it:
    gradlab's ops, ``keras.ops.custom_gradient``; ``Relu`` for a ``Relu`` built under
    ``gradlab.gradient_override``) and where its gradient function comes from. ``fn`` may be a
    ``tf.function`` or a Keras model.
    """
    specs = [tf.TensorSpec.from_tensor(tf.convert_to_tensor(arg)) for arg in args]
    graphs = [tf.function(fn).get_concrete_function(*specs).graph]
    rules, seen = [], set()
    while graphs:
        graph = graphs.pop()
        if id(graph) in seen:
            continue
        seen.add(id(graph))
        for op in graph.get_operations():
            try:
                name = op.get_attr("_gradient_op_type").decode()
            except ValueError:
                continue
            rules.append(GradientRule(op.type, name, _rule_origin(name)))
        for function in getattr(graph, "_functions", {}).values():  # nested functions and branches
            nested = getattr(function, "graph", None)
            if nested is not None:
                graphs.append(nested)
    return rules


def custom_gradient_ops(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The names of the ``tf.custom_gradient`` rules ``fn(*args)`` builds (see :func:`gradient_rules`).

    In a graph, ``tf.custom_gradient`` wraps its outputs in an ``IdentityN`` op whose
    ``_gradient_op_type`` attribute names the registered rule; autodiff of ordinary ops leaves none.
    Empty if ``fn`` uses no custom gradient, so a check can tell an answer that uses the technique
    from one that reaches the same numbers another way.
    """
    return [rule.name for rule in gradient_rules(fn, *args) if rule.op_type == "IdentityN"]
