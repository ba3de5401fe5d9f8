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
import numpy as np
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
    assert out.startswith("还不对：你的函数抛出了异常 ValueError: custom_gradient function expected to return 2 gradients")
    assert "提示：product 有两个输入" in out


# --- the self-checks of notebooks 02-07 in Chinese: each untouched starter's verdict --------------------------
# Every verdict of these modules is a template translated before it is filled in: with GRADLAB_LANGUAGE=zh_CN the
# starting point's "Not yet" (and its hint) reads as Chinese and carries exactly the numbers of the English one.

_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?")


def _in_both_languages(monkeypatch, capsys, check, *args) -> tuple[str, str]:
    """What ``check(*args)`` prints in English and in Chinese (both refusals)."""
    printed = []
    for language in ("en", "zh_CN"):
        monkeypatch.setenv(_i18n.LANGUAGE_VARIABLE, language)
        with np.printoptions(precision=4, suppress=True):      # as workbook.setup() sets them
            assert not check(*args)
        printed.append(capsys.readouterr().out)
    return printed[0], printed[1]


def _assert_chinese_verdict(english: str, chinese: str, hint: str) -> None:
    """The Chinese verdict of a refusal: Chinese, with the expected hint, and the English one's numbers."""
    assert english.startswith("Not yet") and chinese.startswith("还不对"), chinese
    assert re.search("[\u4e00-\u9fff]", chinese) and hint in chinese, chinese
    assert sorted(_NUMBER.findall(chinese)) == sorted(_NUMBER.findall(english)), (english, chinese)


def _assert_speaks_chinese(monkeypatch, capsys, hint: str, check, *args) -> str:
    """``check(*args)`` refuses in both languages, and its Chinese verdict (returned) passes the checks above."""
    english, chinese = _in_both_languages(monkeypatch, capsys, check, *args)
    _assert_chinese_verdict(english, chinese, hint)
    return chinese


def test_the_straight_through_checks_speak_chinese(monkeypatch, capsys):
    from exercises import straight_through

    def gradient_case(fn, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return "none" if tape.gradient(y, x) is None else "flows"

    def ste(x):
        return x + tf.stop_gradient(straight_through.quantize(x) - x)

    _assert_speaks_chinese(monkeypatch, capsys, "这属于第 2 节三种情况中的哪一种",
                           straight_through.check_exercise_1, gradient_case)
    _assert_speaks_chinese(monkeypatch, capsys, "这个技巧会引入舍入误差", straight_through.check_exercise_2, ste)


def test_the_keras_checks_speak_chinese(monkeypatch, capsys):
    import keras
    from exercises import keras_layers

    @tf.custom_gradient
    def halve_gradient(x):
        return tf.identity(x), lambda dy: 0.5 * dy

    def build_model():
        inputs = keras.Input(shape=(3,))
        return keras.Model(inputs, halve_gradient(inputs))

    def clipped_backward(x):
        def grad(upstream):
            return keras.ops.clip(upstream, -0.1, 0.1)
        return keras.ops.identity(x), grad

    _assert_speaks_chinese(monkeypatch, capsys, "不能在 keras.Input 上调用", keras_layers.check_exercise_1, build_model)
    _assert_speaks_chinese(monkeypatch, capsys, "提示：keras.ops.identity(n) 根据整数 n 构造",
                           keras_layers.check_exercise_2, clipped_backward)


def test_the_surrogate_checks_speak_chinese(monkeypatch, capsys):
    from exercises import surrogate

    @tf.custom_gradient
    def arctan_step(x):
        return surrogate.heaviside(x), tf.zeros_like

    @tf.custom_gradient
    def repaired(x):
        return tf.cast(x > 0, x.dtype), lambda dy: tf.maximum(0.0, 1.0 - tf.abs(x))

    _assert_speaks_chinese(monkeypatch, capsys, "提示：你的 grad 传回的全是零（起始代码的行为）",
                           surrogate.check_exercise_1, arctan_step)
    _assert_speaks_chinese(monkeypatch, capsys, "提示：无论 dy 是多少，grad 传回的都一样", surrogate.check_exercise_2, repaired)


def test_the_relu_checks_speak_chinese(monkeypatch, capsys, relu_network):
    from exercises import relu

    forward, weights, images, labels = relu_network

    @tf.function
    def saliency(images, labels):
        logits = forward(weights, images)
        return tf.gradients(tf.reduce_sum(logits * tf.one_hot(labels, 10)), images)[0]

    _assert_speaks_chinese(monkeypatch, capsys, "提示：这是普通 ReLU 的梯度", relu.check_exercise_1, tf.nn.relu)
    _assert_speaks_chinese(monkeypatch, capsys, "是在覆盖的 with 块内创建的吗",
                           relu.check_exercise_2, saliency, images, labels, forward, weights)


def test_the_chain_checks_speak_chinese(monkeypatch, capsys, chain_backward):
    import gradlab
    from exercises import chain

    backward = chain_backward
    english, chinese = _in_both_languages(monkeypatch, capsys, chain.check_exercise_1,
                                          lambda plain_norms, clip_at, max_norm: dict(plain_norms), backward)
    assert re.match(r"还不对（在 dense_\d 之后裁剪，界为 [\d.]+）：", chinese), chinese   # as "Not yet (clip ...): "
    _assert_chinese_verdict(english, chinese, "提示：反向传播关于它起始的梯度是线性的")
    _assert_speaks_chinese(monkeypatch, capsys, "哪些层需要各自的裁剪",
                           chain.check_exercise_2, lambda h, i: gradlab.clip_gradient_norm(h, 0.1) if i == 4 else h, backward)


def test_the_optimizer_checks_speak_chinese(monkeypatch, capsys):
    from exercises import optimizer

    def my_clip_by_global_norm(grads, max_norm):
        return [tf.clip_by_norm(g, max_norm) for g in grads]

    _assert_speaks_chinese(monkeypatch, capsys, "提示：这是逐变量裁剪", optimizer.check_exercise_1, my_clip_by_global_norm)
    _assert_speaks_chinese(monkeypatch, capsys, "变量的哪个属性表明它属于隐藏层",
                           optimizer.check_exercise_2, lambda grads, variables: grads)


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
