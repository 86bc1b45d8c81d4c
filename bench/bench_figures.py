"""Benchmark drawing the figures of 20 CIFAR-size models against matplotlib itself, in one run.

selcal: `write_plots` of 20 models (10 000 test rows, 10 classes, 5 000 validation rows each;
the default scores, the logit profile kept as `--plots` keeps it), PNG, drawn on every core
this process may use, as `selcal evaluate --plots` draws them. The baseline: matplotlib
(Agg canvas, no pyplot) drawing and saving as many simple two-panel line figures (one
1 000-point line per panel, a title, axis labels, a legend) at the same resolution (150 dpi,
6 x 4.9 inches), one after the other. Each measurement runs in a fresh subprocess that has
imported matplotlib and selcal before its clock starts, baseline and selcal alternating; the
medians and their ratio are printed (the target: at most 2).

    python bench/bench_figures.py             # 20 models, 3 runs each
    python bench/bench_figures.py --models 40 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BASELINE = """
import sys, tempfile, time
from pathlib import Path
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

count = int(sys.argv[1])
x = np.linspace(0, 100, 1000)
with tempfile.TemporaryDirectory() as folder:
    start = time.perf_counter()
    for i in range(count):
        figure = Figure(figsize=(6.0, 4.9), dpi=150)
        FigureCanvasAgg(figure)
        for j, ax in enumerate(figure.subplots(1, 2)):
            ax.plot(x, np.sqrt(x + i + j), label=f"series {j}")
            ax.set_title(f"panel {j}")
            ax.set_xlabel("coverage (%)")
            ax.set_ylabel("risk (%)")
            ax.legend()
        figure.savefig(Path(folder) / f"f{i}.png", dpi=150)
    print(time.perf_counter() - start)
"""

SELCAL = """
import pickle, sys, tempfile, time
import matplotlib, matplotlib.figure
from selcal.figures import write_plots
from selcal.figures.render import default_workers


def main():
    result = pickle.loads(open(sys.argv[1], "rb").read())
    workers = int(sys.argv[2]) or default_workers()
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        written = write_plots(result, folder, "png", workers=workers)
        print(time.perf_counter() - start, len(written))


if __name__ == "__main__":
    main()
"""


def make_result(n_models: int):
    import numpy as np

    import selcal

    rng = np.random.default_rng(0)
    models = []
    options = selcal.Options(logit_profile=True)
    for i in range(n_models):
        n, k = 15_000, 10
        labels = rng.integers(0, k, size=n)
        logits = rng.standard_normal((n, k)).astype(np.float32) * (1.0 + 0.1 * i)
        logits[np.arange(n), labels] += rng.gamma(2.0, 1.5, size=n).astype(np.float32)
        models.append(selcal.evaluate_arrays(logits[5000:], labels[5000:], logits[:5000], labels[:5000],
                                             name=f"cifar10_model_{i:02d}", options=options))
    return selcal.EvaluationResult(models=models, options=options)


def run(code: str, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                         os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env)
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0, help="drawing processes (0: every core available)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        pickled = Path(folder) / "result.pickle"
        pickled.write_bytes(pickle.dumps(make_result(args.models)))
        selcals, baselines = [], []
        count = None
        for _ in range(args.runs):
            seconds, count = run(SELCAL, str(pickled), str(args.workers))
            selcals.append(float(seconds))
            baselines.append(float(run(BASELINE, count)[0]))
    report = {
        "case": f"{args.models} models, 10 000 x 10 test rows and 5 000 validation rows each, {count} PNG figures",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "selcal_seconds": statistics.median(selcals),
        "baseline_seconds": statistics.median(baselines),
        "selcal_runs": selcals,
        "baseline_runs": baselines,
    }
    report["ratio"] = report["selcal_seconds"] / report["baseline_seconds"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
