"""The CPU caps: strict nbval as on a lesser x86-64 CPU (``make test-notebooks CPU_CAP=...``).

NumPy, OpenBLAS, oneDNN and XLA choose their kernels by what the CPU offers. ``tools/cpu_dispatch.py``
caps them; CI runs strict nbval under each cap (``.ci/run``). These tests pin what a cap sets, that it
takes effect, and that the check does its job: planted cells printing which zero ``np.unique`` keeps,
a float32 ``np.sum`` of ``np.tanh`` values and a float32 ``np.dot`` to their last digit fail under a
cap, while the same numbers printed the workbook's way (``+ 0.0``, rounded) pass under every cap.
"""
from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest
from planted import code_cell, failed_cells, store_run, strict_nbval

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import cpu_dispatch  # noqa: E402

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="the caps are x86-64 feature levels")


def test_a_cap_sets_every_dispatching_library_and_keeps_other_xla_flags():
    env = cpu_dispatch.capped_environment("avx2", {"XLA_FLAGS": "--xla_cpu_max_isa=AVX512 --xla_dump_to=x"})
    assert env["NPY_DISABLE_CPU_FEATURES"].split() == ["X86_V4", "AVX512_ICL", "AVX512_SPR"]
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["XLA_FLAGS"].split() == ["--xla_dump_to=x", "--xla_cpu_max_isa=AVX2"]
    assert "X86_V3" in cpu_dispatch.capped_environment("baseline", {})["NPY_DISABLE_CPU_FEATURES"].split()


def test_an_unknown_cap_is_named():
    with pytest.raises(ValueError, match=r"cap must be one of \['avx2', 'baseline'\]; got 'avx512'"):
        cpu_dispatch.capped_environment("avx512")


@pytest.mark.parametrize("cap", sorted(cpu_dispatch.CAPS))
def test_the_cap_takes_effect_as_numpy_reports_it(cap):
    env = cpu_dispatch.capped_environment(cap)
    after = cpu_dispatch.dispatched(env)
    assert not set(cpu_dispatch.CAPS[cap].numpy_disabled) & set(after["numpy"]), after
    assert all(core == cpu_dispatch.CAPS[cap].openblas_core for core in after["openblas"]), after
    lines = cpu_dispatch.verify(cap, env)
    assert lines[0].startswith(f"cap {cap}: ") and lines[1].startswith("  NumPy: "), lines


DATA = ("import numpy as np\n"
        "zeros = np.array([0.0, -0.0, 0.0, -0.0, 1.0] * 3)\n"
        "x = np.random.default_rng(1).normal(size=100_000).astype(np.float32)")
FRAGILE = {
    "unique of +-0": "print(np.unique(zeros))",
    "float32 sum to the last digit": "print(repr(np.sum(np.tanh(x))))",
    "float32 dot to the last digit": "print(repr(np.dot(x, x)))",
}
ROBUST = ("print(np.unique(zeros) + 0.0, f'{np.sum(np.tanh(x)):.2f}', f'{np.dot(x, x):.1f}')\n"
          "assert abs(np.dot(x, x) / x.size - 1.0) < 0.01")


def _environment(cap: str | None) -> dict[str, str]:
    base = {key: value for key, value in os.environ.items()
            if key not in ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE", "ONEDNN_MAX_CPU_ISA", "XLA_FLAGS")}
    return base if cap is None else cpu_dispatch.capped_environment(cap, base)


def test_strict_nbval_under_the_caps_fails_each_planted_fragile_cell_and_passes_the_robust_one(tmp_path):
    path = tmp_path / "planted.ipynb"
    cells = [code_cell(DATA), *(code_cell(source) for source in FRAGILE.values()), code_cell(ROBUST)]
    store_run(path, cells, _environment(None))
    code, out = strict_nbval(path, _environment(None))
    assert code == 0, out                                   # the same CPU: every output matches
    failed = {}
    for cap in cpu_dispatch.CAPS:
        code, out = strict_nbval(path, _environment(cap))
        failed[cap] = {cell.split()[1] for cell in failed_cells(out)}
        assert "4" not in failed[cap], f"the robust cell failed under {cap}:\n{out}"
    for number, name in enumerate(FRAGILE, start=1):
        assert any(str(number) in cells for cells in failed.values()), f"no cap changed the planted {name}: {failed}"
