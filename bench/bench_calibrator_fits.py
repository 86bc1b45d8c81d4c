"""Benchmark the post-hoc calibrators' numerical core (selcal/scores/calibrators.py), fits and application.

On seeded synthetic logits (bench/make_dumps.py): each calibrator fitted on an ImageNet-size validation
set (10 000 x 1000) and applied to 50 000 x 1000 test rows in chunks like the pipeline's, and
``dirichlet`` fitted on a CIFAR-100-size validation set (10 000 x 100) with lambda = mu = 0.01 (issue 26:
under 30 s on 2 cores). The baseline in the same run is the ``temp`` fit (fits.fit_temperature) on the
same validation rows, so the ratios say what a calibrator costs on top of temperature scaling whatever
the machine's load. Each figure is the median of ``--runs`` runs; the load average is printed.

    python bench/bench_calibrator_fits.py                 # everything, one run
    python bench/bench_calibrator_fits.py --only dirichlet --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_dumps import synthetic_logits  # noqa: E402

from selcal.scores import calibrators  # noqa: E402
from selcal.metrics.exact_sums import single_threaded_blas  # noqa: E402
from selcal.scores.fits import fit_temperature  # noqa: E402

CHUNK_ROWS = 8192


def logits(n: int, k: int, seed: int):
    blocks = list(synthetic_logits(n, k, seed))
    return np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])


def timed(function, *args, **kwargs):
    """Seconds and result of a fit, with one BLAS thread as ``selcal evaluate`` fits every score."""
    start = time.perf_counter()
    with single_threaded_blas():
        result = function(*args, **kwargs)
    return time.perf_counter() - start, result


def apply_seconds(fit, test) -> float:
    start = time.perf_counter()
    with single_threaded_blas():
        for first in range(0, test.shape[0], CHUNK_ROWS):
            fit.log_probabilities(test[first:first + CHUNK_ROWS])
    return time.perf_counter() - start


def imagenet(runs: int) -> dict:
    val, val_y = logits(10_000, 1000, 1)
    test, _ = logits(50_000, 1000, 0)
    rows: dict[str, list] = {}
    for _ in range(runs):
        seconds, temp = timed(fit_temperature, val, val_y)
        rows.setdefault("temp_fit", []).append(seconds)
        t = temp.temperature
        fits = {"vector": lambda: calibrators.fit_vector(val, val_y, temperature=t),
                "ets": lambda: calibrators.fit_ets(val, val_y, t),
                "isotonic": lambda: calibrators.fit_isotonic(val, val_y)}
        for name, fit_it in fits.items():
            seconds, fit = timed(fit_it)
            rows.setdefault(f"{name}_fit", []).append(seconds)
            rows.setdefault(f"{name}_apply_50k", []).append(apply_seconds(fit, test))
            if name == "vector":
                rows.setdefault("vector_iterations", []).append(fit.iterations)
    medians = {key: statistics.median(values) for key, values in rows.items()}
    medians.update({f"{key}_over_temp_fit": medians[key] / medians["temp_fit"]
                    for key in list(medians) if key.endswith(("_fit", "_50k")) and key != "temp_fit"})
    return medians


def dirichlet(runs: int) -> dict:
    val, val_y = logits(10_000, 100, 1)
    out: dict[str, list] = {}
    for _ in range(runs):
        seconds, temp = timed(fit_temperature, val, val_y)
        out.setdefault("temp_fit", []).append(seconds)
        seconds, fit = timed(calibrators.fit_dirichlet, val, val_y, odir_lambda=0.01, mu=0.01,
                             temperature=temp.temperature)
        out.setdefault("dirichlet_fit", []).append(seconds)
        out.setdefault("iterations", []).append(fit.iterations)
        out.setdefault("gradient_norm", []).append(fit.gradient_norm)
    medians = {key: statistics.median(values) for key, values in out.items()}
    medians["dirichlet_fit_over_temp_fit"] = medians["dirichlet_fit"] / medians["temp_fit"]
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", choices=("imagenet", "dirichlet"), default=None)
    args = parser.parse_args()
    report = {"cpus": os.cpu_count(), "load_before": os.getloadavg()}
    if args.only in (None, "dirichlet"):
        report["dirichlet_10000x100"] = dirichlet(args.runs)
    if args.only in (None, "imagenet"):
        report["imagenet_10000x1000_val"] = imagenet(args.runs)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
