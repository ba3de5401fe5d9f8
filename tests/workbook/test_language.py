"""The language of the workbook's messages: English unless a notebook's setup line chooses another.

``workbook.setup(language="zh_CN")`` (the Chinese notebooks' setup line) makes the self-checks' verdicts and
the setup line's own output Chinese, through ``exercises/_i18n.py`` and the compiled catalog; exceptions stay
English; without it, nothing an English learner reads changes.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import tensorflow as tf

import workbook
from exercises import _i18n
from exercises import custom_gradient
from exercises.start_here import check_exercise_1, check_exercise_2

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _starter(x, factor, bound):
    @tf.custom_gradient
    def op(x):
        def grad(dy):
            return dy
        return tf.identity(x), grad
    return op(x)


def _failing(x, factor, bound):
    raise ValueError("an English error")


@pytest.fixture
def chinese(monkeypatch):
    monkeypatch.setenv(_i18n.LANGUAGE_VARIABLE, "zh_CN")


def test_verdicts_are_english_by_default(monkeypatch, capsys):
    monkeypatch.delenv(_i18n.LANGUAGE_VARIABLE, raising=False)
    check_exercise_2(None)
    check_exercise_2.confirm(2.0)
    assert capsys.readouterr().out == "Not yet: set your_answer to a number first.\nThis solution passes check_exercise_2.\n"


def test_verdicts_are_chinese_once_chosen(chinese, capsys):
    assert not check_exercise_1(_starter)
    out = capsys.readouterr().out
    assert out.startswith("还不对：当 factor=3.0、bound=1.0、上游梯度 dy = [") and "提示：你的 grad 原样返回了 dy" in out
    check_exercise_2(2.0)
    check_exercise_2.confirm(2.0)
    assert capsys.readouterr().out.splitlines()[-1] == "这个参考答案通过了 check_exercise_2。"


def test_exceptions_stay_english_inside_a_chinese_verdict(chinese, capsys):
    check_exercise_1(_failing)
    assert capsys.readouterr().out == "还不对：scale_and_clip(x, 3.0, 1.0) 抛出了异常 ValueError: an English error\n"


def test_a_message_without_translation_stays_english(chinese):
    assert _i18n._("A message nobody translated.") == "A message nobody translated."


def test_setup_chooses_the_language_for_the_kernel():
    code = ("import os, workbook; workbook.setup(language='zh_CN'); print(os.environ['GRADLAB_LANGUAGE']);"
            "workbook.setup(); print(os.environ.get('GRADLAB_LANGUAGE'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=NOTEBOOKS, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].endswith("CPU · 单线程，算子逐个执行 · 随机种子 0 · 数组打印 4 位小数")
    assert lines[2] == "zh_CN" and lines[4].endswith("CPU · 1 thread, one op at a time · seed 0 · arrays print 4 decimals")
    assert lines[5] == "None"


def test_setup_refuses_a_language_without_a_catalog():
    with pytest.raises(ValueError, match=r"language must be one of \['en', 'zh_CN'\]; got 'fr'"):
        workbook.setup(language="fr")


def test_the_chinese_notebooks_import_the_same_workbook():
    code = "import sys, workbook, exercises; print(workbook.__file__); print(exercises.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=NOTEBOOKS / "zh", capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(NOTEBOOKS / "workbook.py"), str(NOTEBOOKS / "exercises" / "__init__.py")]


def test_a_check_that_reads_tensorflows_english_error_still_recognises_it_in_chinese(chinese, capsys):
    """exercises/custom_gradient.py tells "one gradient for two inputs" by TensorFlow's (English) message."""
    def product(x, w):
        @tf.custom_gradient
        def op(x, w):
            def grad(dy):
                return dy * w
            return x * w, grad
        return op(x, w)

    assert not custom_gradient.check_exercise_2(product)
    out = capsys.readouterr().out
    assert out.startswith("还不对：你的函数 抛出了异常 ValueError: custom_gradient function expected to return 2 gradients")
    assert "提示：product 有两个输入" in out


# --- the self-checks of notebooks 08 to 14: the starters' verdicts in Chinese ------------------------------

#: Each exercise module whose messages are translated, and the English notebook its exercises are in.
EXERCISE_NOTEBOOKS = {
    "higher_order": "08_higher_order_forward_mode",
    "performance": "09_performance",
    "legacy": "10_appendix_tf1_legacy",
    "reference": "11_appendix_reference",
    "domain_adversarial": "12_domain_adversarial",
    "recipes": "13_recipes",
    "questions": "14_questions",
}
#: What the notebooks have imported when a learner reaches the exercises.
PRELUDE = ("import numpy as np\nimport tensorflow as tf\nimport keras\nimport gradlab\nimport gradlab.layers\n"
           "from papers import dann\n")
CJK = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
#: English words a translated sentence does not keep (no code in these verdicts is spelled so; `with` is).
ENGLISH_WORDS = re.compile(r"\b(?:the|is|are|your|does|not|and|what|it|of|to)\b")


def _exercise_outputs(notebook: str) -> list[str]:
    """What each exercise cell of the English ``notebook`` prints, its starter untouched, in the chosen language."""
    namespace: dict = {}
    exec(PRELUDE, namespace)
    printed = []
    for cell in nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4).cells:
        if cell.cell_type == "code" and "exercise" in cell.metadata.get("tags", []):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                exec(cell.source, namespace)
            printed.append(out.getvalue())
    return printed


def _assert_translated(english: str, chinese: str) -> None:
    """``chinese`` is the Chinese of the verdict ``english``: Chinese prose, the same numbers."""
    assert english.startswith("Not yet") and chinese.startswith("还不对"), (english, chinese)
    assert len(CJK.findall(chinese)) >= 10, chinese
    assert not ENGLISH_WORDS.findall(chinese), chinese
    assert sorted(NUMBER.findall(chinese)) == sorted(NUMBER.findall(english)), (english, chinese)


@pytest.mark.parametrize("module", sorted(EXERCISE_NOTEBOOKS))
def test_the_starters_verdicts_are_chinese_with_the_same_numbers(module, monkeypatch):
    monkeypatch.delenv(_i18n.LANGUAGE_VARIABLE, raising=False)
    english = _exercise_outputs(EXERCISE_NOTEBOOKS[module])
    monkeypatch.setenv(_i18n.LANGUAGE_VARIABLE, "zh_CN")
    chinese = _exercise_outputs(EXERCISE_NOTEBOOKS[module])
    assert len(chinese) == len(english) >= 2
    for en, zh in zip(english, chinese):
        _assert_translated(en, zh)


def _custom(rule, forward=tf.identity):
    """An op with the value ``forward(x)`` and the gradient ``rule(dy)``."""
    @tf.custom_gradient
    def op(x):
        return forward(x), rule
    return op


#: Per module, an answer whose verdict ends in a hint, and the hint's Chinese.
HINTED = {
    "higher_order": (lambda m: m.check_exercise_1(6.0, 6.0), "只乘了一次系数 3"),
    "performance": (lambda m: m.check_exercise_1(lambda log, technique: 1.0), "提示：请在第 1 轮及以后的各轮中"),
    "legacy": (lambda m: m.check_exercise_2(_custom(lambda dy: 0.1 * dy)), "这是把 dy 缩放了 0.1 倍"),
    "reference": (lambda m: m.check_exercise_1(_custom(lambda dy: dy, tf.sign)), "grad 乘以 dy 了吗"),
    "domain_adversarial": (lambda m: m.check_exercise_2(lambda features, reversal, head: head(features)),
                           "它们收到的是普通梯度"),
    "recipes": (lambda m: m.check_exercise_1(lambda x: tf.math.log(tf.maximum(x, 1e-30))), "在 x <= 0 处值为 0"),
    "questions": (lambda m: m.check_exercise_2(lambda losses_fn, w, clip: tf.zeros_like(w)), "应为 ["),
}


@pytest.mark.parametrize("module", sorted(HINTED))
def test_a_hint_is_chinese_with_the_same_numbers(module, monkeypatch, capsys):
    answer, hint = HINTED[module]
    checks = importlib.import_module(f"exercises.{module}")
    monkeypatch.delenv(_i18n.LANGUAGE_VARIABLE, raising=False)
    assert not answer(checks)
    english = capsys.readouterr().out
    monkeypatch.setenv(_i18n.LANGUAGE_VARIABLE, "zh_CN")
    assert not answer(checks)
    chinese = capsys.readouterr().out
    _assert_translated(english, chinese)
    assert hint in chinese, chinese
