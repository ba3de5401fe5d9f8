"""How fast does an explorer's plot follow its slider? In the kernel alone, and in a real browser.

Two measurements of ``gradlab.widgets.scale_explorer()`` (the other explorers cost the same: one
``tf.function`` call, four blitted curves, one PNG):

* **kernel**: the time of one update in this process, from ``slider.value = v`` to the new PNG
  in the ``Image`` widget (computation, drawing, encoding; no frontend attached);
* **browser**: in JupyterLab driven by chromium (the harness of ``tests/project/test_browser.py``), the
  latency from a keyboard step on the focused slider (``keydown``, timed in the page) to the
  redrawn plot (the ``<img>``'s ``load`` event for the new PNG plus the next animation frame),
  over ``--steps`` steps (default 40: 20 to the left, then 20 back).

Targets on a 2-core machine: kernel median <= 30 ms; browser median <= 100 ms and p95 <= 250 ms.

Usage (from the repository root, with the pinned stack in .venv and chromium at /usr/bin/chromium)::

    TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/explorer_latency.py
    ... --skip-browser        # the kernel measurement only
    ... --check               # exit with status 1 if a target is missed
    ... --screenshots DIR     # save the explorer before and after one step (what moved)
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"kernel median": 30.0, "browser median": 100.0, "browser p95": 250.0}  # milliseconds


def load_browser_harness():
    """tests/project/test_browser.py as a module (its JupyterLab, chromium and explorer helpers)."""
    spec = importlib.util.spec_from_file_location(
        "gradlab_browser_harness", ROOT / "tests" / "project" / "test_browser.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary(name: str, samples_ms) -> dict:
    samples = np.asarray(samples_ms, dtype=float)
    stats = {"n": samples.size, "median": float(np.median(samples)),
             "p95": float(np.percentile(samples, 95)), "max": float(samples.max())}
    print(f"{name:<34} n={stats['n']:<4d} median {stats['median']:7.1f} ms   "
          f"p95 {stats['p95']:7.1f} ms   max {stats['max']:7.1f} ms")
    return stats


def measure_kernel(updates: int) -> dict:
    import gradlab.widgets

    explorer = gradlab.widgets.scale_explorer(factor=0.5)
    slider = explorer.sliders["factor"]
    values = np.round(np.concatenate([np.arange(0.6, 2.0, 0.1), np.arange(1.9, -2.0, -0.1),
                                      np.arange(-1.9, 0.6, 0.1)]), 1)
    for value in values[:10]:  # warm-up
        slider.value = float(value)
    total, compute, render = [], [], []
    for i in range(updates):
        value = float(values[i % len(values)])
        if value == slider.value:
            value = round(value + 0.1, 1)
        start = time.perf_counter()
        slider.value = value  # the observer recomputes, redraws and updates the Image widget
        total.append((time.perf_counter() - start) * 1e3)
        assert explorer.message == "", explorer.message
    for _ in range(min(updates, 100)):  # where the time goes
        start = time.perf_counter()
        explorer.compute(factor=-1.3)
        compute.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        explorer.renderer.render()
        render.append((time.perf_counter() - start) * 1e3)
    print(f"kernel: {explorer.tracing_count()} trace(s) for {updates} updates; PNG "
          f"{len(explorer.image.value) / 1024:.0f} KiB, {explorer.renderer.pixel_size[0]}x{explorer.renderer.pixel_size[1]} px")
    stats = summary("kernel: one slider update", total)
    summary("kernel:   of which compute (tf)", compute)
    summary("kernel:   of which blit + PNG", render)
    explorer.close()
    return stats


INSTALL_TIMER = """(img) => {
    window.__gradlab = {t0: null, latencies: []};
    document.addEventListener('keydown', () => { window.__gradlab.t0 = performance.now(); }, true);
    img.addEventListener('load', () => {
        const t0 = window.__gradlab.t0;
        if (t0 === null) return;
        window.__gradlab.t0 = null;
        requestAnimationFrame(() => window.__gradlab.latencies.push(performance.now() - t0));
    });
}"""


def measure_browser(steps: int, screenshots: Path | None = None) -> dict:
    harness = load_browser_harness()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="gradlab-bench-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        notebook = harness.write_test_notebook(root / "explorer.ipynb").name
        lab = harness.JupyterLab(root, Path(tmp) / "state")
        try:
            with sync_playwright() as playwright:
                browser = harness.launch_chromium(playwright)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    started = time.perf_counter()
                    harness.open_and_run_all(page, lab, notebook)
                    print(f"browser: notebook opened and run in {time.perf_counter() - started:.1f} s")
                    view = harness.ExplorerView(page)
                    view.handle.focus()
                    if screenshots is not None:  # the explorer before and after one step
                        screenshots.mkdir(parents=True, exist_ok=True)
                        view.root.screenshot(path=str(screenshots / "explorer_before.png"))
                        view.step("ArrowLeft")
                        view.root.screenshot(path=str(screenshots / "explorer_after_one_step.png"))
                        print(f"screenshots written to {screenshots}")
                    for key in ("ArrowRight", "ArrowLeft"):  # warm-up, not timed
                        view.step(key)
                    page.evaluate(INSTALL_TIMER, view.image.element_handle())
                    half = steps // 2
                    keys = ["ArrowLeft"] * half + ["ArrowRight"] * (steps - half)
                    for i, key in enumerate(keys):
                        view.step(key)
                        page.wait_for_function(f"window.__gradlab.latencies.length >= {i + 1}")
                    latencies = page.evaluate("window.__gradlab.latencies")
                finally:
                    browser.close()
        finally:
            lab.stop()
    return summary("browser: keyboard step -> redrawn", latencies)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="browser slider steps (>= 30)")
    parser.add_argument("--updates", type=int, default=200, help="kernel updates")
    parser.add_argument("--skip-browser", action="store_true", help="measure the kernel only")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--screenshots", type=Path, default=None,
                        help="save the explorer before and after one slider step as PNGs in this folder")
    args = parser.parse_args(argv)
    if args.steps < 30:
        parser.error("--steps must be at least 30")

    print(f"gradlab explorer latency on {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}")
    results = {}
    kernel = measure_kernel(args.updates)
    results["kernel median"] = kernel["median"]
    if not args.skip_browser:
        browser = measure_browser(args.steps, args.screenshots)
        results["browser median"], results["browser p95"] = browser["median"], browser["p95"]
    missed = [name for name, value in results.items() if value > TARGETS[name]]
    for name, value in results.items():
        verdict = "ok" if name not in missed else "MISSED"
        print(f"target {name:<15} <= {TARGETS[name]:5.0f} ms: {value:6.1f} ms  {verdict}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
