"""How the self-checks name an error a learner's answer raised: one line, never a traceback."""
from __future__ import annotations


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
