"""Self-checks for the workbook's exercises, one module per notebook.

A notebook imports its checks with, for example, ``from exercises.start_here import check_exercise_1``
(the notebooks' kernel runs in ``notebooks/``). Each check takes the learner's answer, prints a
verdict that says what to fix ("Not yet: ...") or "Correct! ...", and returns ``True`` or ``False``.
A check never raises on a wrong answer, so a learner's kernel and work are never lost to it.
The checks are tested in ``tests/test_exercises_*.py``.
"""
