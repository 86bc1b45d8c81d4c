"""Benchmark: bootstrap intervals with B = 1000 resamples of N = 50 000 synthetic rows, and the cost
of ``--bootstrap`` on the 10 000-row sample as the ratio of two whole ``selcal evaluate`` runs.

Run: ``python bench/bench_bootstrap.py [N] [B]``. Evaluates every score (msp, max_logit,
pnorm, temp) on synthetic logits, then times :func:`selcal.bootstrap.add_intervals`
(no refit) and prints the time. ``python bench/bench_bootstrap.py ratios [RUNS]``: in one run, the
wall time of ``selcal evaluate sample_logits/calibrator_cifar10_resnet50_ce.parquet -q`` with and
without ``--bootstrap 1000``, for the default scores and for ``--scores calibrators``, each the best
of RUNS (default 3) whole processes (the two commands alternating), and the two ratios (issue 34: at
most 2x and 3x), with the spread of both sides and the load.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import selcal
from selcal.bootstrap import add_intervals


def synthetic(n: int, k: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, size=n)
    logits = rng.normal(0.0, 1.0, size=(n, k)).astype(np.float32)
    logits[np.arange(n), labels] += rng.gamma(2.0, 1.5, size=n).astype(np.float32)
    return logits, labels


def main(n: int = 50_000, resamples: int = 1000) -> None:
    logits, labels = synthetic(n)
    val_logits, val_labels = synthetic(n // 5, seed=1)
    model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name="synthetic")
    result = selcal.EvaluationResult(models=[model], options=selcal.Options())
    start, cpu_start = time.perf_counter(), time.process_time()
    add_intervals(result, resamples=resamples, seed=0)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"bootstrap B={resamples} N={n} scores={','.join(model.scores)}: {elapsed:.2f} s ({cpu:.2f} s CPU)")


SAMPLE = "sample_logits/calibrator_cifar10_resnet50_ce.parquet"


def process_times(commands: list[list[str]], runs: int) -> list[list[float]]:
    """The wall times of ``runs`` whole ``selcal`` processes of each command, the commands alternating
    (a burst of other work then slows each about as much)."""
    import os
    import subprocess

    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for args, spent in zip(commands, times):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "selcal.cli", *args], check=True, capture_output=True,
                           env={**os.environ, "PYTHONPATH": os.getcwd()})
            spent.append(time.perf_counter() - start)
    return times


def ratios(runs: int = 3) -> dict[str, float]:
    """``--bootstrap 1000`` against none on the 10 000-row sample, default scores and calibrators: the
    ratio of the best (least disturbed) of ``runs`` processes each, with the spread (best-worst) of both."""
    import os

    out = {}
    for label, scores in (("default scores", []), ("--scores calibrators", ["--scores", "calibrators"])):
        load = os.getloadavg()[0]
        without, with_ = process_times([["evaluate", SAMPLE, "-q", *scores],
                                        ["evaluate", SAMPLE, "-q", "--bootstrap", "1000", *scores]], runs)
        base, boot = min(without), min(with_)
        out[label] = boot / base
        print(f"{label}: {base:.2f} s without ({base:.2f}-{max(without):.2f}), {boot:.2f} s with --bootstrap 1000 "
              f"({boot:.2f}-{max(with_):.2f}): {boot / base:.2f}x (best of {runs}; load {load:.2f} -> "
              f"{os.getloadavg()[0]:.2f})")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["ratios"]:
        ratios(*(int(a) for a in sys.argv[2:3]))
    else:
        main(*(int(a) for a in sys.argv[1:3]))
