#!/usr/bin/env bash
# Tests gradlab as a library, the way a user installs it: build the wheel, install it into a fresh
# virtual environment that already has the given TensorFlow, check that the install kept that
# TensorFlow, and run gradlab's own unit tests there (not the notebooks, not the project checks).
#
# Usage: tools/test_library.sh TENSORFLOW_REQUIREMENT ["OTHER_REQUIREMENTS"]
#   e.g. tools/test_library.sh tensorflow-cpu==2.16.2 "keras==3.3.3 numpy==1.26.4"   (the oldest stack)
#        tools/test_library.sh tensorflow-cpu==2.21.0                               (the workbook's pin)
# Run by `make test-library` and CI. PYTHON (default python3) creates the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
tf_req=${1:?usage: tools/test_library.sh TENSORFLOW_REQUIREMENT ["OTHER_REQUIREMENTS"]}
other_reqs=${2:-}
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0

echo "== building the wheel"
"$root/.venv/bin/python" -m build --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/gradlab-*.whl)

echo "== a fresh environment with $tf_req ${other_reqs}"
"${PYTHON:-python3}" -m venv "$work/venv"
py="$work/venv/bin/python"
# The test tools at the workbook's pins; TensorFlow (and Keras, NumPy) as the user would have them.
grep -E '^(pytest|hypothesis)==' requirements.txt >"$work/test-pins.txt"  # markers kept: pip picks the line
"$py" -m pip install --quiet "$tf_req" $other_reqs -r "$work/test-pins.txt"
# pip freeze spells the name as the wheel does: tensorflow-cpu (2.16) or tensorflow_cpu (2.21).
before=$("$py" -m pip freeze | grep -iE '^(tensorflow|tensorflow[-_]cpu|keras|numpy)==' | sort)

echo "== pip install gradlab (the wheel, with its plotting extras)"
"$py" -m pip install --quiet "$wheel[notebook]"
after=$("$py" -m pip freeze | grep -iE '^(tensorflow|tensorflow[-_]cpu|keras|numpy)==' | sort)
echo "$after" | sed 's/^/   /'
if [ "$before" != "$after" ]; then
    echo "FAILED: installing gradlab changed the environment's TensorFlow stack:"
    diff <(echo "$before") <(echo "$after") || true
    exit 1
fi

echo "== gradlab's unit tests against the installed wheel"
# A copy of tests/ outside the checkout, so that `import gradlab` finds the installed wheel.
mkdir "$work/run" && cp -r tests "$work/run/tests" && cp pyproject.toml "$work/run/"
cd "$work/run"
"$py" -c 'import gradlab, sys; sys.exit(0 if "site-packages" in gradlab.__file__ else "not the wheel: " + gradlab.__file__)'
"$py" -m pytest -q -p no:cacheprovider tests \
    --ignore=tests/test_project.py --ignore=tests/test_browser.py --ignore=tests/test_packaging.py \
    --ignore=tests/test_book.py --ignore=tests/test_workbook_setup.py --ignore=tests/test_nudge.py \
    --ignore=tests/test_nblint.py --ignore=tests/test_nbfmt.py \
    --ignore-glob='tests/test_exercises_*.py' --ignore-glob='tests/test_papers_*.py' -W ignore::DeprecationWarning
