#!/usr/bin/env bash
# Runs every notebook (errors and asserts: `pytest --nbval-lax`, stored outputs not compared) on
# each TensorFlow stack pinned in tools/versions/, in environments built from those pins alone.
#
#   tools/versions/tf2.16.txt        the oldest supported stack (TF 2.16.2, Keras 3.3.3, NumPy 1.26)
#   tools/versions/tf2.19-colab.txt  Google Colab's stack (TF 2.19, Keras 3.10, NumPy 2.0)
#
# A leg named *-colab emulates Colab: gradlab is not installed; each notebook is copied alone into
# an empty folder and run there with GRADLAB_COLAB=1, so its first cell takes the Colab branch
# (git clone of GRADLAB_REPO, `%pip install "./gradlab-workbook[notebook]"` into the kernel's
# interpreter, helpers on sys.path). Before each notebook the environment is put back to exactly
# its pins (uv pip sync), as a fresh Colab runtime would be. GRADLAB_REPO is, by default, a
# snapshot of this checkout's working tree (tracked and untracked files, not the ignored ones)
# committed into a throwaway git repository; COLAB_REPO=HEAD clones the checkout's committed HEAD
# instead, and any other COLAB_REPO value (a URL or a path) is passed on as it is. After the
# notebooks, the leg runs tests/library/test_widgets.py there too (the explorers on ipywidgets 7.7.1).
# Every other leg installs gradlab from the checkout (`--no-deps -e .`) and runs
# `pytest --nbval-lax notebooks` from the repository (the kernels' working directory is notebooks/).
#
# Usage: tools/test_versions.sh [LEG...]     e.g. tools/test_versions.sh tf2.16 tf2.19-colab
#   (default: every tools/versions/*.txt). Run by `make test-versions` and CI.
# The environments live in .venv-versions/<leg> (ignored by git) and are rebuilt only when the pin
# file, requirements.txt, pyproject.toml, uv or the Python changes; a clean clone builds them all.
# Every leg runs, then the script prints one summary (leg, notebook, cell, the error's last line)
# and exits non-zero if any leg failed. PYTHON (default python3) creates the environments.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1 TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0
# ipykernel 6.17 (the Colab leg) warns about frozen modules and its debugger at every kernel start.
export PYDEVD_DISABLE_FILE_VALIDATION=1
unset PYTHONPATH
python=${PYTHON:-python3}
uv=${UV:-$root/.venv/bin/uv}
[ -x "$uv" ] || { echo "tools/test_versions.sh needs uv at $uv: run make install first (or set UV)"; exit 2; }
cache=${VERSIONS_CACHE:-$root/.venv-versions}
mkdir -p "$cache/logs"
# The folder ignores itself (as .pytest_cache does), so the checkout's `git status` stays clean.
[ -f "$cache/.gitignore" ] || printf '# created by tools/test_versions.sh\n*\n' >"$cache/.gitignore"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cell_timeout=${CELL_TIMEOUT:-900}

if [ $# -eq 0 ]; then
    set -- $(for f in tools/versions/*.txt; do basename "$f" .txt; done)
fi
for leg in "$@"; do
    [ -f "tools/versions/$leg.txt" ] || { echo "no pin file tools/versions/$leg.txt"; exit 2; }
done

now() { date +%s; }
declare -A build_time run_time status
results="$work/results.tsv"   # leg, notebook, cell, last line of the error
: >"$results"

# Appends one line per failed or errored test of a JUnit XML report to $results.
summarize() {   # leg junit.xml
    "$python" - "$1" "$2" >>"$results" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
leg, path = sys.argv[1], sys.argv[2]
ansi = re.compile(r"(\x1b|#x1B)\[[0-9;]*[A-Za-z]")   # JUnit XML spells ESC as #x1B
try:
    cases = ET.parse(path).getroot().iter("testcase")
except (OSError, ET.ParseError) as error:
    print(f"{leg}\t(no report)\t-\t{error}")
    sys.exit()
for case in cases:
    for kind in ("failure", "error"):
        for node in case.findall(kind):
            text = ansi.sub("", (node.text or "") + "\n" + (node.get("message") or ""))
            lines = [line.strip() for line in text.splitlines()
                     if line.strip() and not set(line.strip()) <= set("-=_^~ ")]
            # nbval's report ends with the kernel's traceback; its last line is the exception.
            last = next((l for l in reversed(lines) if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Exit)\b", l)),
                        lines[-1] if lines else kind)
            notebook = case.get("classname", "").rsplit(".ipynb", 1)[0].replace(".", "/") + ".ipynb" \
                if ".ipynb" in case.get("classname", "") else case.get("file") or case.get("classname", "")
            if re.fullmatch(r"AssertionError:?", last):   # a bare assert: show its line
                at = [l for l in lines if l.startswith("---->") or l.startswith("--->")]
                if at:
                    last += " at " + re.sub(r"^-+> *\d+ *", "", at[-1])
            print(f"{leg}\t{notebook}\t{case.get('name')}\t{last[:300]}")
EOF
}

# (Re)builds .venv-versions/<leg> from tools/versions/<leg>.txt when its inputs changed.
build() {   # leg
    local leg=$1 env="$cache/$1" pins="tools/versions/$1.txt" stamp start
    stamp=$( { cat "$pins" requirements.txt pyproject.toml; "$uv" --version; "$python" --version; } | sha256sum | cut -d' ' -f1)
    if [ -f "$env/.gradlab-versions-stamp" ] && [ "$(cat "$env/.gradlab-versions-stamp")" = "$stamp" ]; then
        echo "== [$leg] environment up to date ($env)"
        build_time[$leg]=0
        return 0
    fi
    echo "== [$leg] building a fresh environment from $pins"
    start=$(now)
    rm -rf "$env"
    # --seed: pip in the environment (the Colab leg's notebooks run `%pip install`).
    "$uv" venv --quiet --seed --python "$python" "$env" &&
        "$uv" pip install --quiet --python "$env/bin/python" -r "$pins" || return 1
    if [[ $leg != *-colab ]]; then
        "$uv" pip install --quiet --python "$env/bin/python" --no-deps -e . || return 1
    fi
    "$uv" pip check --python "$env/bin/python" || return 1
    # The Colab leg goes back to exactly this state before each notebook.
    "$uv" pip freeze --quiet --python "$env/bin/python" >"$env/.gradlab-versions-freeze.txt" || return 1
    echo "$stamp" >"$env/.gradlab-versions-stamp"
    build_time[$leg]=$(( $(now) - start ))
}

versions() {   # python: one line with the versions in use
    "$1" -c 'import importlib.metadata as m
names = ["tensorflow-cpu", "tensorflow", "keras", "numpy", "matplotlib", "scikit-learn", "ipywidgets", "ipykernel", "gradlab-tf"]
found = []
for name in names:
    try:
        found.append(f"{name}=={m.version(name)}")
    except m.PackageNotFoundError:
        pass
print("   " + " ".join(found))'
}

# A leg that installs gradlab from the checkout: every notebook, from the repository.
run_checkout() {   # leg
    local leg=$1 env="$cache/$1" py="$cache/$1/bin/python" xdist=()
    versions "$py"
    "$py" -c 'import pathlib, sys, gradlab; f = pathlib.Path(gradlab.__file__).resolve()
sys.exit(0 if f == pathlib.Path("gradlab/__init__.py").resolve() else f"gradlab imports from {f}, not this checkout")' || return 1
    # pytest-xdist where the pins have it: one worker more than cores, a notebook's cells on one worker.
    if "$py" -c 'import xdist' 2>/dev/null; then xdist=(-n $(( $(nproc) + 1 )) --dist loadscope); fi
    # The translated editions (notebooks/zh) run the English code cells (tests/project/test_i18n.py), so
    # another stack learns nothing new from them; make test and the capped runs execute them.
    PYTHONPATH="$PWD/tools" "$py" -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout="$cell_timeout" \
        -p no:cacheprovider -p nbval_kernel_start -q -W ignore::DeprecationWarning "${xdist[@]}" \
        --ignore=notebooks/zh --junitxml="$cache/logs/$leg.xml" notebooks 2>&1 |
        tee "$cache/logs/$leg.log"
    local rc=${PIPESTATUS[0]}
    summarize "$leg" "$cache/logs/$leg.xml"
    return "$rc"
}

# The Colab emulation: each notebook alone in an empty folder, gradlab installed by its first cell.
colab_repo=""
run_colab() {   # leg
    local leg=$1 env="$cache/$1" py="$cache/$1/bin/python" rc=0 nb name dir start where
    if [ -z "$colab_repo" ]; then
        case "${COLAB_REPO:-worktree}" in
            worktree)
                # Tracked and untracked files as they are now (deleted ones left out), ignored files not.
                colab_repo="$work/gradlab-snapshot"
                mkdir -p "$colab_repo"
                git ls-files -z --cached --others --exclude-standard |
                    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
                    tar --null -T - -cf - | tar -xf - -C "$colab_repo"
                git -C "$colab_repo" init -q && git -C "$colab_repo" add -A &&
                    git -C "$colab_repo" -c user.name=test_versions -c user.email=test@localhost \
                        commit -q -m "working tree of $(git rev-parse --short HEAD)" || return 1
                echo "   GRADLAB_REPO: a snapshot of the working tree (on $(git rev-parse --short HEAD))" ;;
            HEAD) colab_repo=$root; echo "   GRADLAB_REPO: this checkout's committed HEAD ($(git rev-parse --short HEAD))" ;;
            *) colab_repo=$COLAB_REPO; echo "   GRADLAB_REPO: $colab_repo" ;;
        esac
    fi
    : >"$cache/logs/$leg.log"
    # Every English notebook, and the Chinese 00: the Chinese edition's code cells are the English ones
    # (tests/project/test_i18n.py), so its 00 proves what differs on Colab, the edition's path (its Colab
    # badge opens notebooks/zh/...), the catalogs found in the clone, and Chinese verdicts.
    for nb in notebooks/*.ipynb notebooks/zh/00_start_here.ipynb; do
        name=$(basename "$nb" .ipynb)
        label=$name; [[ $nb == notebooks/zh/* ]] && label="zh-$name"
        # A fresh runtime: exactly the pins again (no gradlab, no ipympl, Colab's ipywidgets).
        "$uv" pip sync --quiet --python "$py" "$env/.gradlab-versions-freeze.txt" || return 1
        dir="$work/colab/$label"
        mkdir -p "$dir" && cp "$nb" "$dir/"
        echo "-- [$leg] $nb alone in an empty folder"
        start=$(now)
        (cd "$dir" && GRADLAB_COLAB=1 GRADLAB_REPO="$colab_repo" "$py" -m pytest --nbval-lax --nbval-current-env \
            --nbval-cell-timeout="$cell_timeout" -p no:cacheprovider -q -W ignore::DeprecationWarning \
            --junitxml="$cache/logs/$leg-$label.xml" "$name.ipynb") 2>&1 | tee -a "$cache/logs/$leg.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
        echo "   $nb: $(( $(now) - start )) s"
        # The first cell's %pip must have installed into the kernel's interpreter, this environment.
        where=$(cd "$dir" && "$py" -c 'import gradlab; print(gradlab.__file__)' 2>&1)   # not the checkout's gradlab/
        if [[ $where != "$env"/* ]]; then
            echo "$leg	$nb	setup	gradlab not installed into $env by the first cell: $where" >>"$results"
            rc=1
        fi
        summarize "$leg" "$cache/logs/$leg-$label.xml"
    done
    run_colab_widget_tests "$leg" || rc=1
    versions "$py"
    return "$rc"
}

# The explorers' own tests on Colab's ipywidgets (7.7.1), which the notebooks' runs cannot see (a
# tooltip that ipywidgets 7 ignores raises nothing): a fresh runtime again, gradlab[notebook] from a
# clone of GRADLAB_REPO as the first cell installs it, then tests/library/test_widgets.py from the clone.
run_colab_widget_tests() {   # leg
    local leg=$1 env="$cache/$1" py="$cache/$1/bin/python" dir="$work/colab/widget-tests" hypothesis
    hypothesis=$(grep -m1 '^hypothesis==' requirements.txt | cut -d';' -f1)
    "$uv" pip sync --quiet --python "$py" "$env/.gradlab-versions-freeze.txt" &&
        git clone --quiet "$colab_repo" "$dir" &&
        "$uv" pip install --quiet --python "$py" "$dir[notebook]" "$hypothesis" || return 1
    echo "-- [$leg] tests/library/test_widgets.py on ipywidgets $("$py" -c 'import ipywidgets; print(ipywidgets.__version__)')"
    (cd "$dir" && "$py" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
        --junitxml="$cache/logs/$leg-test_widgets.xml" tests/library/test_widgets.py) 2>&1 | tee -a "$cache/logs/$leg.log"
    local rc=${PIPESTATUS[0]}
    summarize "$leg" "$cache/logs/$leg-test_widgets.xml"
    return "$rc"
}

for leg in "$@"; do
    start=$(now)
    if ! build "$leg"; then
        status[$leg]="FAILED (environment build)"
        echo "$leg	tools/versions/$leg.txt	-	the environment did not build (see above)" >>"$results"
        build_time[$leg]=$(( $(now) - start )); run_time[$leg]=0
        continue
    fi
    echo "== [$leg] running the notebooks"
    start=$(now)
    if [[ $leg == *-colab ]]; then run_colab "$leg"; else run_checkout "$leg"; fi
    rc=$?
    run_time[$leg]=$(( $(now) - start ))
    if [ "$rc" -eq 0 ]; then status[$leg]=passed; else status[$leg]=FAILED; fi
done

echo
echo "== tools/test_versions.sh: summary (logs and JUnit reports in ${cache#"$root"/}/logs/)"
failed=0
for leg in "$@"; do
    printf '   %-16s %-26s environment %4s s, notebooks %4s s\n' "$leg" "${status[$leg]}" "${build_time[$leg]}" "${run_time[$leg]}"
    [ "${status[$leg]}" = passed ] || failed=1
done
if [ -s "$results" ]; then
    echo
    echo "   failures (leg, notebook, nbval's cell: code cells counted from 0, the error's last line):"
    sed 's/^/   /; s/\t/  /g' "$results"
fi
exit "$failed"
