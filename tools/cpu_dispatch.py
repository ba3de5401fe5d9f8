"""Run a command as if on a lesser x86-64 CPU: cap what the libraries dispatch at run time.

Stored outputs must not depend on the CPU. Some libraries pick their kernels when they load, by
what the CPU offers, and those kernels differ in their last bits or in the order of equal keys:

- **NumPy** (``NPY_DISABLE_CPU_FEATURES``): sorting (so which of ``-0.0`` and ``+0.0`` ``np.unique``
  keeps), and transcendental functions such as ``exp``, ``log``, ``log1p``, ``expm1``, ``sin``,
  ``cos``, ``tanh``, ``arctan`` (float32, and float64 ``exp`` too). NumPy's own float32 and float64
  ``sum``, ``mean`` and ``std`` are scalar pairwise code: bitwise the same at every level measured.
- **OpenBLAS**, inside NumPy and SciPy (``OPENBLAS_CORETYPE``): ``np.dot`` and ``@`` in float32 and
  float64 change their last bits from one core type to another.
- **oneDNN** (``ONEDNN_MAX_CPU_ISA``): TensorFlow's float32 ``MatMul``, ``BatchMatMul`` and
  ``Conv2D`` call oneDNN's kernels even with ``TF_ENABLE_ONEDNN_OPTS=0`` (which only turns off
  oneDNN's graph rewrites), and change their last bits between AVX-512, AVX2 and SSE4.1; float64
  matmul and reductions such as ``reduce_sum`` do not.
- **XLA's CPU backend** (``XLA_FLAGS=--xla_cpu_max_isa``): the code ``jit_compile=True`` generates.

The rest of TensorFlow's Eigen kernels are compiled for one instruction set when the wheel is built
and do not dispatch, so no variable moves them; their cache-sized blocking can still differ from CPU
to CPU, and the nudge (``GRADLAB_NUDGE=1``) stands in for that in trained numbers.

Usage (the Makefile's ``CPU_CAP``; CI runs strict nbval under each cap)::

    python tools/cpu_dispatch.py avx2 -- pytest --nbval notebooks     # an AVX2-only CPU (x86-64-v3)
    python tools/cpu_dispatch.py baseline -- pytest ...               # NumPy's baseline (x86-64-v2)
    python tools/cpu_dispatch.py --show avx2                          # what the cap changes here

Before running the command it checks, in a fresh interpreter under the capped environment, that the
cap took effect (NumPy's dispatched features and OpenBLAS's core type, as ``np.show_runtime()``
reports them), and prints what changed on this CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Cap:
    """What a capped CPU offers each library that dispatches at run time."""

    description: str
    numpy_disabled: tuple[str, ...]   # NumPy 2.4's feature groups to switch off
    openblas_core: str                # OpenBLAS core type (DYNAMIC_ARCH builds)
    onednn_isa: str                   # oneDNN's ONEDNN_MAX_CPU_ISA
    xla_isa: str                      # XLA CPU's --xla_cpu_max_isa


CAPS: dict[str, Cap] = {
    "avx2": Cap("an AVX2 CPU without AVX-512 (x86-64-v3, e.g. AMD Zen 2/3, Intel Haswell to Alder Lake)",
                ("X86_V4", "AVX512_ICL", "AVX512_SPR"), "Haswell", "AVX2", "AVX2"),
    "baseline": Cap("an SSE4.2 CPU without AVX (x86-64-v2, NumPy's baseline)",
                    ("X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"), "Nehalem", "SSE41", "SSE4_2"),
}

# Printed by a fresh interpreter under the capped environment: what NumPy and OpenBLAS dispatch.
_PROBE = """
import json, numpy as np
from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
targets = [*__cpu_baseline__, *__cpu_dispatch__]   # what NumPy was built to run: the groups it dispatches
try:
    from threadpoolctl import threadpool_info
except ImportError:  # threadpoolctl comes with scikit-learn; without it OpenBLAS is not reported
    threadpool_info = list
np.dot(np.ones(2), np.ones(2))  # loads OpenBLAS
blas = [i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]
print(json.dumps({"numpy": [t for t in targets if __cpu_features__.get(t)], "openblas": blas}))
"""


def capped_environment(name: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment ``base`` (default: this process's) with every dispatching library capped.

    Args:
      name: a key of ``CAPS`` (``"avx2"`` or ``"baseline"``).
      base: the environment to start from; ``XLA_FLAGS`` already in it are kept.

    Raises:
      ValueError: ``name`` is not a known cap.
    """
    if name not in CAPS:
        raise ValueError(f"cap must be one of {sorted(CAPS)}; got {name!r}")
    cap = CAPS[name]
    env = dict(os.environ if base is None else base)
    env["NPY_DISABLE_CPU_FEATURES"] = " ".join(cap.numpy_disabled)
    env["OPENBLAS_CORETYPE"] = cap.openblas_core
    env["ONEDNN_MAX_CPU_ISA"] = cap.onednn_isa
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_cpu_max_isa")]
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_cpu_max_isa={cap.xla_isa}"])
    return env


def dispatched(env: Mapping[str, str]) -> dict:
    """What NumPy and OpenBLAS dispatch in a fresh interpreter under ``env``."""
    done = subprocess.run([sys.executable, "-c", _PROBE], env=dict(env), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"probing NumPy under the capped environment failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.splitlines()[-1])


def verify(name: str, env: Mapping[str, str]) -> list[str]:
    """Check that the cap took effect; return one line per library saying what it changed here.

    Raises:
      RuntimeError: a disabled NumPy feature group is still dispatched, or OpenBLAS ignored the core type.
    """
    cap = CAPS[name]
    before, after = dispatched({k: v for k, v in env.items() if k not in ("NPY_DISABLE_CPU_FEATURES",
                                                                            "OPENBLAS_CORETYPE")}), dispatched(env)
    still = sorted(set(cap.numpy_disabled) & set(after["numpy"]))
    if still:
        raise RuntimeError(f"NPY_DISABLE_CPU_FEATURES did not take effect: NumPy still dispatches {still}")
    if after["openblas"] and any(core != cap.openblas_core for core in after["openblas"]):
        raise RuntimeError(f"OPENBLAS_CORETYPE={cap.openblas_core} did not take effect: OpenBLAS runs {after['openblas']}")
    lost = sorted(set(before["numpy"]) & set(cap.numpy_disabled))
    return [f"cap {name}: {cap.description}",
            f"  NumPy: {'switched off ' + ', '.join(lost) if lost else 'nothing to switch off on this CPU'}"
            f" (dispatches {', '.join(after['numpy']) or 'its baseline only'})",
            f"  OpenBLAS: {', '.join(before['openblas']) or 'not loaded'} -> {', '.join(after['openblas']) or 'not loaded'}",
            f"  oneDNN: ONEDNN_MAX_CPU_ISA={cap.onednn_isa}; XLA: {env['XLA_FLAGS']}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cap", choices=sorted(CAPS))
    parser.add_argument("--show", action="store_true", help="print what the cap changes on this CPU and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run under the cap")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if platform.machine().lower() not in ("x86_64", "amd64"):
        print(f"cpu_dispatch: the caps are x86-64 feature levels; this is {platform.machine()}: "
              "run the command without CPU_CAP", file=sys.stderr)
        return 2
    if not command and not args.show:
        parser.error("give the command to run after --, or --show")
    env = capped_environment(args.cap)
    print("\n".join(verify(args.cap, env)), flush=True)
    if args.show:
        return 0
    os.execvpe(command[0], command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
