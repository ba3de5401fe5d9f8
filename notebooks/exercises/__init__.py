"""Self-checks for the workbook's exercises, one module per notebook.

A notebook imports its checks with, for example, ``from exercises.start_here import check_exercise_1``
(the notebooks' kernel runs in ``notebooks/``). Each check takes the learner's answer, prints one
verdict that says what to fix ("Not yet: ...") or "Correct! ...", and returns a ``Verdict`` (true
when the answer passes; not echoed under the cell). A check never raises on a wrong answer, so a
learner's kernel and work are never lost to it. A solution cell calls ``check_exercise_N.confirm``,
which says only that the solution passes. All checks run on one harness, ``exercises/_harness.py``;
they are tested in ``tests/workbook/test_exercises_*.py``.
"""
