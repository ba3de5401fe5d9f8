# gradlab: two commands for learners (`make lab`, `make test`), a few for maintainers.
# Both create .venv if it is missing and install the pinned stack once; later runs skip the install
# unless requirements.txt or pyproject.toml changed.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.gradlab-installed
UV_VERSION := 0.13.9
UV     := $(VENV)/bin/uv
PYTEST_ARGS ?=
# Extra JupyterLab options, e.g. make lab LAB_ARGS='--ServerApp.port=9999 --no-browser'
LAB_ARGS ?=

# Silence TensorFlow's C++ start-up logging for everything run from here (kernels inherit it).
export TF_CPP_MIN_LOG_LEVEL := 2
export TF_ENABLE_ONEDNN_OPTS := 0
# Keep pip quiet about upgrades and never prompt.
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# JupyterLab refuses to run as root unless told to.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab lint test test-notebooks translations test-library test-library-oldest test-library-pinned test-versions install execute dist book assignments grade sample-class test-assignments bench bench-explorer clean help

help:
	@echo "make lab    - install (once) and start JupyterLab on notebooks/ at 127.0.0.1"
	@echo "make test   - install (once) and run the whole suite: ruff, gradlab's tests + nbval on every notebook"
	@echo "make test-notebooks [CPU_CAP=avx2|baseline] - strict nbval alone, optionally as on a lesser x86-64 CPU"
	@echo "make test-library - gradlab's unit tests from its wheel, on the oldest supported and the pinned TensorFlow"
	@echo "make test-versions [VERSIONS='tf2.16 tf2.19-colab'] - every notebook (nbval-lax) on each stack in tools/versions/, incl. a Colab emulation"
	@echo "make execute [NB=notebooks/NN_name.ipynb] - re-run notebooks in place (maintainers)"
	@echo "make translations - merge the English notebooks into the Chinese catalogs, build notebooks/zh (then make execute NB=...)"
	@echo "make dist   - build the sdist and wheel of gradlab-tf into dist/ and check their metadata (twine check --strict)"
	@echo "make book   - build the static site (build/book/index.html, Chinese in zh/) from the notebooks as stored, with the API reference"
	@echo "make assignments - the instructor edition in build/assignments/: every notebook as an otter-grader assignment (Chinese: build/assignments/zh/)"
	@echo "make grade NB=00_start_here SUBMISSIONS=dir RESULTS=dir - grade a class without Docker (TIMEOUT=600 s each)"
	@echo "make sample-class - a sample class of 00, 03 and 13 in build/sample-class/"
	@echo "make test-assignments - generate it, check its structure, run docs/instructors.md and grade the sample class"
	@echo "make bench  - what each technique costs: training-step ratios to a baseline, import cost, notebook times"
	@echo "make bench-explorer - slider-to-redraw latency of the explorers, in the kernel and in a real browser"
	@echo "make clean  - remove .venv and caches"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "gradlab needs Python 3.10 or newer; found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV) || { echo "Creating the virtual environment failed: on Debian/Ubuntu run 'apt-get install python3-venv' first."; exit 1; }

$(STAMP): requirements.txt pyproject.toml jupyter/overrides.json | $(PY)
	@# uv installs the pinned stack in seconds where pip takes minutes; it is itself pinned here.
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(UV) pip install --quiet --compile-bytecode --python $(PY) -r requirements.txt
	@# The distribution was named gradlab before it became gradlab-tf (gradlab on PyPI is another project's):
	@# a .venv made then still holds that editable install beside the new one, and the checkout its metadata
	@# (gradlab.egg-info). Removing both leaves the checkout's code.
	@if $(UV) pip show --quiet --python $(PY) gradlab >/dev/null 2>&1; then $(UV) pip uninstall --quiet --python $(PY) gradlab; fi
	@rm -rf gradlab.egg-info
	$(UV) pip install --quiet --python $(PY) --no-deps -e .
	$(UV) pip check --python $(PY)
	@# The editable install must point at this checkout's package (not a namespace package or a stale copy).
	@$(PY) -c 'import pathlib, sys, gradlab; f = gradlab.__file__; sys.exit(0 if f and pathlib.Path(f).resolve() == pathlib.Path("gradlab/__init__.py").resolve() else "gradlab imports from " + str(f) + ", not from this checkout: run make clean, then make install")'
	@# JupyterLab opens without asking whether to fetch Jupyter news (Binder's postBuild does the same).
	@mkdir -p $(VENV)/share/jupyter/lab/settings && cp jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $(STAMP)

install: $(STAMP)

lab: install
	JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter $(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

# ruff over the package, tests, benchmarks, tools and notebooks (rules in pyproject.toml), the layering
# of gradlab's modules (import-linter's contracts in pyproject.toml; --no-cache writes nothing into the
# checkout), then the notebook rules (tools/nblint.py; --stats for the size table) and the storage
# check (tools/nbfmt.py).
lint: install
	$(VENV)/bin/ruff check gradlab tests benchmarks tools notebooks
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/nblint.py
	$(PY) tools/nbfmt.py --check

# pytest-xdist runs test files and notebooks side by side. loadscope keeps
# each notebook's cells (one kernel) and each test module or class together on one worker.
# One worker more than cores: a worker running a notebook waits while its kernel (another process)
# computes, and the extra worker keeps every core busy (4 min 04 s instead of 5 min 02 s on 2 cores).
XDIST := -n $(shell echo $$(( $$(nproc) + 1 ))) --dist loadscope
# nbval with a second run of every code cell in the same kernel (tools/nbval_second_run.py), and a
# kernel that fails to start (workers starting kernels at once can race for a port) started again
# (tools/nbval_kernel_start.py).
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p nbval_second_run -p nbval_kernel_start

test: install lint
	PYTHONPATH=$(CURDIR)/tools $(PY) -m pytest $(XDIST) $(NBVAL) $(PYTEST_ARGS) tests notebooks

# nbval alone (CI runs it after make test: every notebook passes twice in a row in one environment).
# CPU_CAP=avx2 or CPU_CAP=baseline runs it as on a lesser x86-64 CPU: NumPy, OpenBLAS, oneDNN and XLA
# dispatch no kernel above that level (tools/cpu_dispatch.py checks that the cap took effect).
CPU_CAP ?=
CAPPED := $(if $(CPU_CAP),$(PY) tools/cpu_dispatch.py $(CPU_CAP) --,)
test-notebooks: install
	PYTHONPATH=$(CURDIR)/tools $(CAPPED) $(PY) -m pytest $(XDIST) $(NBVAL) $(PYTEST_ARGS) notebooks

# gradlab as a library, from its built wheel, in a fresh environment with a given TensorFlow:
# the oldest supported release and the workbook's pin (CI runs both).
# The oldest is tools/versions/tf2.16.txt's TensorFlow with the Keras and NumPy it pins (left alone,
# pip would pick newer ones and miss what breaks on Keras 3.3); the pin with what it brings.
OLDEST_PINS := tools/versions/tf2.16.txt
TF_OLDEST ?= $(shell grep -E '^tensorflow-cpu==' $(OLDEST_PINS))
OLDEST_WITH ?= $(shell grep -E '^(keras|numpy)==' $(OLDEST_PINS) | xargs)
TF_PINNED ?= tensorflow-cpu==2.21.0
test-library: test-library-oldest test-library-pinned
test-library-oldest: install
	PYTHON=$(PYTHON) tools/test_library.sh $(TF_OLDEST) "$(OLDEST_WITH)"
# The pinned leg also installs gradlab-tf[tensorflow] by name for real (make test only resolves that extra).
test-library-pinned: install
	PYTHON=$(PYTHON) GRADLAB_EXTRA_TENSORFLOW=1 tools/test_library.sh $(TF_PINNED)

# Every notebook (errors and asserts: nbval-lax) on each TensorFlow stack pinned in tools/versions/
# (TF 2.16 / Keras 3.3.3 / NumPy 1.26, the workbook's pins, and a Colab emulation with TF 2.19), in
# environments kept in .venv-versions/ and rebuilt when a pin file changes (tools/test_versions.sh).
VERSIONS ?=
test-versions: install
	PYTHON=$(PYTHON) tools/test_versions.sh $(VERSIONS)

# NB names the notebooks of make execute (default: every notebook, both editions) and the notebook make grade
# grades (default: 00_start_here); each target supplies its own default.
NB ?=
ALL_NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb)) $(sort $(wildcard notebooks/zh/*.ipynb))
EXECUTE_NB = $(or $(NB),$(ALL_NOTEBOOKS))

# Re-execute notebooks in place as one clean top-to-bottom run (maintainers: after editing one).
execute: install
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.record_timing=False $(EXECUTE_NB)
	@# Store them the workbook's way (tools/nbfmt.py): no widget state, solutions and the Colab cell in
	@# Colab's form view, their code collapsed in JupyterLab, and exactly what JupyterLab writes when it saves.
	$(PY) tools/nbfmt.py $(EXECUTE_NB)

# The Chinese edition (DEVELOPERS.md, "Translated editions"): merge every English notebook that has a catalog
# (notebooks/locale/zh_CN/LC_MESSAGES/NN_name.po) and the code's messages into the catalogs (changed cells turn
# fuzzy), compile the workbook domain, and build notebooks/zh/ from them (it refuses fuzzy or empty messages).
# A rebuilt notebook whose code changed needs make execute NB=notebooks/zh/NN_name.ipynb.
translations: install
	$(PY) tools/i18n.py update
	$(PY) tools/i18n.py build

# The sdist and the wheel (dist/gradlab_tf-<version>.tar.gz, dist/gradlab_tf-<version>-py3-none-any.whl), built
# from this checkout (PEP 517, build as pinned), then their metadata checked as PyPI checks it on upload
# (twine check --strict: the README renders, no field is missing). tests/project/test_packaging.py runs it.
dist: install
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

# Benchmarks are never part of the test suite. BENCH_ARGS='--quick' gives a shorter run.
BENCH_ARGS ?=
# The book: Sphinx + MyST-NB from the stored notebooks (docs/conf.py, tools/build_book.py). Its tools
# are pinned in docs/requirements.txt and installed once into .venv, constrained by the workbook's pins.
BOOK_STAMP := $(VENV)/.gradlab-book-installed
$(BOOK_STAMP): docs/requirements.txt $(STAMP)
	$(UV) pip install --quiet --python $(PY) -r docs/requirements.txt -c requirements.txt
	@touch $(BOOK_STAMP)

book: $(BOOK_STAMP)
	$(PY) tools/build_book.py

# The instructor edition (docs/instructors.md): every notebook as an otter-grader assignment, generated from
# its exercise cells and self-checks into build/assignments/ (tools/assignments/make_assignments.py).
# otter-grader is pinned in tools/assignments/requirements.txt and installed once into .venv,
# constrained by the workbook's pins. ASSIGN_ARGS='--run-tests' also runs every solutions notebook.
ASSIGN_STAMP := $(VENV)/.gradlab-assignments-installed
ASSIGN_ARGS ?=
$(ASSIGN_STAMP): tools/assignments/requirements.txt $(STAMP)
	$(UV) pip install --quiet --python $(PY) -r tools/assignments/requirements.txt -c requirements.txt
	@touch $(ASSIGN_STAMP)

assignments: $(ASSIGN_STAMP)
	$(PY) tools/assignments/make_assignments.py $(ASSIGN_ARGS)

# Grades a class without Docker (tools/assignments/grade.py; docs/instructors.md § Grading): one sub-folder
# or file per student in SUBMISSIONS, a folder per student and gradebook.csv in RESULTS. TIMEOUT: seconds
# per student; JOBS: students graded side by side.
GRADE_NB = $(or $(NB),00_start_here)
SUBMISSIONS ?= submissions/$(GRADE_NB)
RESULTS ?= results/$(GRADE_NB)
TIMEOUT ?= 600
JOBS ?= 1
# MANIFEST: the grader manifest's SHA-256 make assignments printed (default: the one it recorded beside grader/).
MANIFEST ?=
grade: install
	$(PY) tools/assignments/grade.py $(GRADE_NB) $(SUBMISSIONS) $(RESULTS) --timeout $(TIMEOUT) --jobs $(JOBS) $(if $(MANIFEST),--manifest $(MANIFEST))

# A sample class for notebooks 00, 03 and 13 in build/sample-class/ (tools/assignments/sample_class.py).
sample-class: install
	$(PY) tools/assignments/sample_class.py

# The edition's structure for every notebook (tests/project/test_assignments.py, with otter assign), then
# every command of docs/instructors.md as written, and the sample class graded by make grade, each
# gradebook compared with the expected scores (tools/assignments/grade_sample.py).
test-assignments: assignments
	$(PY) -m pytest -q -p no:cacheprovider tests/project/test_assignments.py
	$(PY) tools/assignments/grade_sample.py

bench: install
	$(PY) benchmarks/run.py $(BENCH_ARGS)

bench-explorer: install
	$(PY) benchmarks/explorer_latency.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-versions .pytest_cache .hypothesis build dist *.egg-info
