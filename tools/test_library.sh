#!/usr/bin/env bash
# Tests gradlab as a library, the way a user installs it: build the wheel, install it into a fresh
# virtual environment that already has the given TensorFlow, check that the install kept that
# TensorFlow, and run gradlab's own unit tests there (not the notebooks, not the project checks).
#
# Usage: tools/test_library.sh TENSORFLOW_REQUIREMENT ["OTHER_REQUIREMENTS"]
#   e.g. tools/test_library.sh tensorflow-cpu==2.16.2 "keras==3.3.3 numpy==1.26.4"   (the oldest stack)
#        tools/test_library.sh tensorflow-cpu==2.21.0                               (the workbook's pin)
# Run by `make test-library` and CI. PYTHON (default python3) creates the environment.
# GRADLAB_EXTRA_TENSORFLOW=1 (the pinned leg) then also installs gradlab-tf[tensorflow] by its name, for real,
# into another fresh environment: the full tensorflow wheel (546 MiB to download, 2 GB installed) is too much
# for make test, where tests/project/test_packaging.py installs [cpu] and [notebook] and resolves [tensorflow].
set -euo pipefail
cd "$(dirname "$0")/.."
tf_req=${1:?usage: tools/test_library.sh TENSORFLOW_REQUIREMENT ["OTHER_REQUIREMENTS"]}
other_reqs=${2:-}
# GRADLAB_PLAN_ONLY=1: say what would be installed and stop (tests/project/test_ci.py checks the legs so).
if [ -n "${GRADLAB_PLAN_ONLY:-}" ]; then
    echo "plan: $tf_req $other_reqs"
    [ -z "${GRADLAB_EXTRA_TENSORFLOW:-}" ] || echo "extra: gradlab-tf[tensorflow]"
    exit 0
fi
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0

echo "== building the wheel"
"$root/.venv/bin/python" -m build --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/gradlab_tf-*.whl)
version=$(basename "$wheel" | cut -d- -f2)

echo "== a fresh environment with $tf_req ${other_reqs}"
"${PYTHON:-python3}" -m venv "$work/venv"
py="$work/venv/bin/python"
# The test tools at the workbook's pins; TensorFlow (and Keras, NumPy) as the user would have them.
grep -E '^(pytest|hypothesis)==' requirements.txt >"$work/test-pins.txt"  # markers kept: pip picks the line
"$py" -m pip install --quiet "$tf_req" $other_reqs -r "$work/test-pins.txt"
# pip freeze spells the name as the wheel does: tensorflow-cpu (2.16) or tensorflow_cpu (2.21).
before=$("$py" -m pip freeze | grep -iE '^(tensorflow|tensorflow[-_]cpu|keras|numpy)==' | sort)

echo "== pip install gradlab-tf (the wheel, with its plotting extras)"
"$py" -m pip install --quiet "$wheel[notebook]"
after=$("$py" -m pip freeze | grep -iE '^(tensorflow|tensorflow[-_]cpu|keras|numpy)==' | sort)
echo "$after" | sed 's/^/   /'
if [ "$before" != "$after" ]; then
    echo "FAILED: installing gradlab changed the environment's TensorFlow stack:"
    diff <(echo "$before") <(echo "$after") || true
    exit 1
fi

echo "== gradlab's library tests (tests/library) against the installed wheel, outside the checkout"
# A copy of the folder outside the checkout, so that `import gradlab` finds the installed wheel.
mkdir "$work/run" && cp -r tests/library "$work/run/tests" && cp pyproject.toml "$work/run/"
cd "$work/run"
"$py" -c 'import gradlab, sys; sys.exit(0 if "site-packages" in gradlab.__file__ else "not the wheel: " + gradlab.__file__)'
"$py" -m pytest -q -p no:cacheprovider tests -W ignore::DeprecationWarning

if [ -n "${GRADLAB_EXTRA_TENSORFLOW:-}" ]; then
    echo "== pip install \"gradlab-tf[tensorflow]\" by its name, from the folder with the wheel, into a fresh environment"
    "${PYTHON:-python3}" -m venv "$work/venv-tensorflow"
    "$work/venv-tensorflow/bin/python" -m pip install --quiet --find-links "$work/dist" "gradlab-tf[tensorflow]==$version"
    GRADLAB_VERSION=$version "$work/venv-tensorflow/bin/python" - <<'PY'
import importlib.metadata as metadata
import os
import sys

import gradlab

names = {d.metadata["Name"].lower().replace("_", "-") for d in metadata.distributions()}
versions = (metadata.version("gradlab-tf"), gradlab.__version__, os.environ["GRADLAB_VERSION"])
print("   gradlab-tf", versions[0], "with", *(f"{n}=={metadata.version(n)}" for n in ("tensorflow", "tensorflow-cpu") if n in names))
if len(set(versions)) != 1:
    sys.exit(f"FAILED: gradlab-tf {versions[0]}, gradlab.__version__ {versions[1]}, the wheel {versions[2]}")
if "tensorflow" not in names or "tensorflow-cpu" in names:
    sys.exit("FAILED: the extra [tensorflow] must bring the regular tensorflow build, and no tensorflow-cpu")
PY
fi
