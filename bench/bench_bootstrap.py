"""Benchmark: bootstrap intervals with B = 1000 resamples of N = 50 000 synthetic rows.

Run: ``python bench/bench_bootstrap.py [N] [B]``. Evaluates every score (msp, max_logit,
pnorm, temp) on synthetic logits, then times :func:`selcal.bootstrap.add_intervals`
(no refit) and prints the time.
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


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
