"""gradlab as a library: the wheel and sdist build, say the right things, and install into an
environment's own TensorFlow without touching it."""
from __future__ import annotations

import email.parser
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import gradlab
from gradlab import _compat

ROOT = Path(__file__).resolve().parents[2]
#: The distribution's name (the import package is gradlab): on PyPI, gradlab is another project's.
DISTRIBUTION = "gradlab-tf"
# Every module of the package, subpackages included (e.g. "widgets/_view.py").
MODULES = sorted(p.relative_to(ROOT / "gradlab").as_posix() for p in (ROOT / "gradlab").rglob("*.py")
                 if "__pycache__" not in p.parts)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The wheel and the sdist, built from this checkout with `python -m build` (PEP 517)."""
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


@pytest.fixture(scope="module")
def metadata(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(wheel.read(name).decode())


def test_the_files_are_named_for_this_version(dist):
    assert dist["wheel"].name == f"gradlab_tf-{gradlab.__version__}-py3-none-any.whl"
    assert dist["sdist"].name == f"gradlab_tf-{gradlab.__version__}.tar.gz"


def test_the_wheel_holds_the_package_its_type_marker_and_license(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
    for module in MODULES:
        assert f"gradlab/{module}" in names
    assert "gradlab/py.typed" in names
    assert "gradlab/locale/zh_CN/LC_MESSAGES/gradlab.mo" in names, "the explorers' Chinese labels (widgets/_labels.py)"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "notebooks/")) for n in names), "the wheel is the library only"


def test_the_sdist_can_rebuild_the_wheel(dist):
    with tarfile.open(dist["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "gradlab/py.typed"} <= names
    assert {f"gradlab/{m}" for m in MODULES} <= names


def test_metadata_names_the_license_python_and_readme(metadata):
    assert metadata["Name"] == DISTRIBUTION and metadata["Version"] == gradlab.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE" and (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert metadata["Requires-Python"] == ">=3.10"
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    assert metadata["Description-Content-Type"] == "text/markdown"


def _requirements(metadata) -> list[Requirement]:
    return [Requirement(line) for line in metadata.get_all("Requires-Dist")]


def test_no_tensorflow_is_required_so_an_installed_one_is_kept(metadata):
    """`pip install gradlab-tf` must not add tensorflow-cpu next to a GPU `tensorflow` (two
    distributions writing one package) nor upgrade the TensorFlow a user has."""
    for req in _requirements(metadata):
        if req.name.startswith("tensorflow"):
            assert req.marker is not None and "extra" in str(req.marker), f"{req} is not optional"
    base = {r.name for r in _requirements(metadata) if r.marker is None}
    assert base == {"keras", "numpy"}
    keras = next(r for r in _requirements(metadata) if r.name == "keras")
    assert keras.specifier.contains("3.0.0") and not keras.specifier.contains("2.15.0")


def test_the_extras_declare_exactly_the_supported_tensorflow_range(metadata):
    supported = SpecifierSet(f">={_compat.MIN_TENSORFLOW[0]}.{_compat.MIN_TENSORFLOW[1]},"
                             f"<{_compat.MAX_TENSORFLOW[0]}.{_compat.MAX_TENSORFLOW[1]}")
    assert {"tensorflow", "cpu", "notebook"} <= set(metadata.get_all("Provides-Extra"))
    tf_requirements = [r for r in _requirements(metadata) if r.name in ("tensorflow", "tensorflow-cpu")]
    assert {r.name for r in tf_requirements} == {"tensorflow", "tensorflow-cpu"}
    for req in tf_requirements:
        assert req.specifier == supported, f"{req}: the extras and gradlab/_compat.py disagree"
    for version in ("2.16.0", "2.16.2", "2.19.1", "2.21.0"):
        assert version in supported
    for version in ("2.15.1", "2.22.0"):
        assert version not in supported


def test_installing_the_wheel_here_changes_nothing_but_gradlab(dist):
    """A dry run into this environment (which has the pinned TensorFlow): pip would install
    gradlab alone, no TensorFlow, Keras or NumPy."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-",
         "--no-index", str(dist["wheel"])],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert [item["metadata"]["name"] for item in report["install"]] == [DISTRIBUTION]


@pytest.mark.parametrize("version", ["2.16.0", "2.16.2", "2.18.1", "2.21.0", "2.21.0rc1"])
def test_supported_tensorflow_versions_are_accepted(version):
    _compat.check_tensorflow_version(version)


@pytest.mark.parametrize("version", ["2.15.1", "2.13.0", "2.22.0", "3.0.0", "1.15.5"])
def test_an_unsupported_tensorflow_gives_an_import_error_that_says_what_to_install(version):
    expected = rf"gradlab needs TensorFlow 2\.16 to 2\.21.*found TensorFlow {re.escape(version)}.*pip install"
    with pytest.raises(ImportError, match=expected):
        _compat.check_tensorflow_version(version)


@pytest.mark.parametrize("case", ["missing", "too old"])
def test_import_gradlab_without_a_supported_tensorflow_fails_clearly(case):
    """In a fresh interpreter: no TensorFlow at all, or an old one, and then `import gradlab`."""
    fake = ("import sys; sys.modules['tensorflow'] = None" if case == "missing" else
            "import sys, types; tf = types.ModuleType('tensorflow'); tf.__version__ = '2.15.1'; "
            "sys.modules['tensorflow'] = tf")
    code = f"{fake}\ntry:\n    import gradlab\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("gradlab needs TensorFlow"), result.stdout
    assert "pip install" in result.stdout


# --- twine and make dist ------------------------------------------------------------------------------

def test_twine_check_strict_passes_on_the_wheel_and_the_sdist(dist):
    """What PyPI checks on upload: the metadata is complete and the README renders as the description."""
    result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(dist["wheel"]), str(dist["sdist"])],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_make_dist_builds_both_into_dist_and_runs_twine_check():
    result = subprocess.run(["make", "--no-print-directory", "-n", "dist"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.splitlines()
    build = next(i for i, c in enumerate(commands) if c.endswith("-m build --outdir dist ."))
    check = next(i for i, c in enumerate(commands) if c.endswith("-m twine check --strict dist/*"))
    assert commands.index("rm -rf dist") < build < check, commands


# --- the wheel installed by its name, with each extra, into a fresh environment -----------------------
# uv (pinned in the Makefile, in .venv) installs from its cache, where `make install` left TensorFlow:
# the extras [cpu] and [notebook] are installed for real in seconds. The extra [tensorflow] brings the
# full `tensorflow` wheel (546 MiB to download, 2 GB installed, where the workbook has tensorflow-cpu):
# here its resolution only (a dry run), its real install in tools/test_library.sh (make test-library).

def _tensorflow_build() -> str:
    """The distribution the extra [cpu] brings on this machine (pyproject.toml's markers)."""
    return "tensorflow-cpu" if sys.platform == "linux" and platform.machine() == "x86_64" else "tensorflow"


TRY_IMPORT = "try:\n    import gradlab\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')"
CHECK_IMPORT = """
import hashlib, importlib.metadata as metadata, json, pathlib
import gradlab, gradlab.layers, gradlab.plots, gradlab.widgets
print(json.dumps({"version": gradlab.__version__, "distribution": metadata.version("gradlab-tf"),
                  "site_packages": "site-packages" in pathlib.Path(gradlab.__file__).parts,
                  "init_sha256": hashlib.sha256(pathlib.Path(gradlab.__file__).read_bytes()).hexdigest()}))
"""


@pytest.fixture(scope="module")
def fresh_installs(dist, tmp_path_factory) -> dict:
    """A fresh virtual environment, and gradlab-tf installed into it by name from a folder holding the
    wheel alone: bare, then [tensorflow] as a dry run, then [notebook], then [cpu]. What each step did."""
    uv = Path(sys.executable).with_name("uv")
    if not uv.is_file():
        pytest.fail(f"uv is missing from {uv.parent.name}/: run make install", pytrace=False)
    work = tmp_path_factory.mktemp("fresh")
    wheelhouse = work / "wheelhouse"
    wheelhouse.mkdir()
    shutil.copy2(dist["wheel"], wheelhouse)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "NO_COLOR": "1"}
    env.pop("VIRTUAL_ENV", None)

    def uv_install(extra: str, *options: str) -> subprocess.CompletedProcess:
        requirement = f"{DISTRIBUTION}{extra}=={gradlab.__version__}"     # by name, never a path to the wheel
        result = subprocess.run([str(uv), "pip", "install", "--python", str(python), "--find-links", str(wheelhouse),
                                 *options, requirement], capture_output=True, text=True, timeout=600, env=env)
        assert result.returncode == 0, f"uv pip install {requirement}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        return result

    def installed() -> set[str]:
        freeze = subprocess.run([str(uv), "pip", "freeze", "--python", str(python)], capture_output=True, text=True,
                                timeout=120, env=env, check=True).stdout
        return {re.split(r"[=@ ]", line, maxsplit=1)[0].lower().replace("_", "-") for line in freeze.splitlines()}

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=work)

    steps: dict = {}
    uv_install("")
    steps["bare"] = {"installed": installed(), "import": run(TRY_IMPORT)}
    dry = uv_install("[tensorflow]", "--dry-run")
    steps["tensorflow"] = {"would_install": dict(re.findall(r"^ \+ ([\w.-]+)==(\S+)$", dry.stdout + dry.stderr, re.M)),
                           "installed": installed()}
    uv_install("[notebook]")
    steps["notebook"] = {"installed": installed()}
    uv_install("[cpu]")
    steps["cpu"] = {"installed": installed(), "import": run(CHECK_IMPORT)}
    return steps


def test_installed_bare_by_name_it_brings_no_tensorflow_and_says_what_to_install(fresh_installs):
    bare = fresh_installs["bare"]
    assert {DISTRIBUTION, "keras", "numpy"} <= bare["installed"]
    assert not {"tensorflow", "tensorflow-cpu"} & bare["installed"]
    assert bare["import"].returncode == 0, bare["import"].stderr[-3000:]
    assert bare["import"].stdout.startswith("gradlab needs TensorFlow"), bare["import"].stdout
    assert "[tensorflow]" in bare["import"].stdout


def test_the_tensorflow_extra_resolves_to_the_regular_build_in_the_supported_range(fresh_installs):
    would = fresh_installs["tensorflow"]["would_install"]
    assert "tensorflow" in would and "tensorflow-cpu" not in would, sorted(would)
    assert would["tensorflow"] in SpecifierSet(f">={_compat.MIN_TENSORFLOW[0]}.{_compat.MIN_TENSORFLOW[1]},"
                                               f"<{_compat.MAX_TENSORFLOW[0]}.{_compat.MAX_TENSORFLOW[1]}")
    assert "tensorflow" not in fresh_installs["tensorflow"]["installed"], "a dry run installs nothing"


def test_the_notebook_extra_brings_the_plotting_stack_and_no_tensorflow(fresh_installs):
    installed = fresh_installs["notebook"]["installed"]
    assert {"matplotlib", "ipywidgets"} <= installed
    assert not {"tensorflow", "tensorflow-cpu"} & installed


def test_the_cpu_extra_brings_tensorflow_and_gradlab_imports_from_the_wheel(fresh_installs):
    cpu = fresh_installs["cpu"]
    assert _tensorflow_build() in cpu["installed"]
    assert cpu["import"].returncode == 0, cpu["import"].stderr[-3000:]
    found = json.loads(cpu["import"].stdout.strip().splitlines()[-1])
    assert found["version"] == found["distribution"] == gradlab.__version__
    assert found["site_packages"], "gradlab imported from somewhere else than the environment's site-packages"
    assert found["init_sha256"] == hashlib.sha256((ROOT / "gradlab" / "__init__.py").read_bytes()).hexdigest(), \
        "the installed gradlab is not this checkout's (another distribution installed a gradlab package?)"
