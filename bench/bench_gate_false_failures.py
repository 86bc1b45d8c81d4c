"""How often does the default CI gate fail a model that is NOT worse? (issue 20)

Two models of equal quality are made from the cross-entropy ResNet-50 of sample_logits/
(calibrator_cifar10_resnet50_ce.parquet): each is its logits plus independent Gaussian noise of
standard deviation SIGMA (default 1.0; the logits' per-row spread is about 3), drawn afresh for
A and for B, on the validation and on the test rows. A and B are exchangeable: neither is worse
in expectation, but on any one data set they differ (about 1% of their predictions do). Each
repetition also draws a fresh evaluation set: N rows (default 5000) of the 10 000 test rows,
without replacement; both models are fitted on the same 5000 validation rows (split column).

Per repetition, both models are evaluated with --bootstrap B (default 1000, seed = repetition)
and judged three ways:

* ``check`` (default gate: accuracy, msp AURC, msp ECE; p-values from the intervals, Holm),
* ``compare`` (default gate: the same metrics, paired bootstrap p-values, Holm),
* the rule of ``check`` before issue 20, for contrast: every metric of every score judged, a
  failure when the two 95% intervals do not overlap on the worse side.

The false-failure rate is the share of repetitions that fail, with a 95% Clopper-Pearson interval.

    python bench/bench_gate_false_failures.py [--reps 100] [--rows 5000] [--bootstrap 1000] [--sigma 1.0]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from scipy.stats import beta

import selcal
from selcal import checks
from selcal.bootstrap import add_intervals, paired_differences

ROOT = Path(__file__).resolve().parents[1]
CE = ROOT / "sample_logits" / "calibrator_cifar10_resnet50_ce.parquet"


def load():
    table = pq.read_table(CE)
    logits = np.stack(table.column("logits").to_numpy(zero_copy_only=False)).astype(np.float64)
    labels = table.column("label").to_numpy()
    split = np.array(table.column("split").to_pylist())
    return logits, labels, split


def old_rule_fails(current: dict, baseline: dict) -> bool:
    """check before issue 20, with intervals: any metric whose intervals are apart on the worse side."""
    for name, base in checks.metrics_of(baseline["models"][0]).items():
        metric = checks.metrics_of(current["models"][0])[name]
        if base.ci is None or metric.ci is None or base.value is None or metric.value is None:
            continue
        lower = checks.better(metric.metric) == "lower"
        if (metric.ci[0] > base.ci[1]) if lower else (metric.ci[1] < base.ci[0]):
            return True
    return False


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--sigma", type=float, default=1.0)
    args = parser.parse_args()

    logits, labels, split = load()
    val, test = split == "val", np.flatnonzero(split == "test")
    failures = {"check": 0, "compare": 0, "old check rule": 0}
    started = time.perf_counter()
    for rep in range(args.reps):
        rng = np.random.default_rng(1000 + rep)
        rows = np.sort(rng.choice(test, size=args.rows, replace=False))
        models, results = [], []
        for name in ("A", "B"):
            noisy = logits + rng.normal(0.0, args.sigma, size=logits.shape)
            model = selcal.evaluate_arrays(noisy[rows], labels[rows], noisy[val], labels[val], name=name).models[0]
            models.append(model)
            result = add_intervals(selcal.EvaluationResult([model], selcal.Options()),
                                   resamples=args.bootstrap, seed=rep)
            results.append(json.loads(result.to_json()))
        a, b = results
        failures["check"] += checks.check(b, a).exit_code
        differences = paired_differences(models[0], models[1], resamples=args.bootstrap, seed=rep)
        failures["compare"] += checks.compare(models[0], models[1], differences, confidence=0.95,
                                              resamples=args.bootstrap, seed=rep).exit_code
        failures["old check rule"] += old_rule_fails(b, a)
        if (rep + 1) % 10 == 0:
            print(f"  {rep + 1} repetitions, {time.perf_counter() - started:.0f} s: {failures}", flush=True)
    print(f"equal models (CE ResNet-50 + N(0, {args.sigma}^2) noise each), {args.reps} repetitions of "
          f"{args.rows} test rows, --bootstrap {args.bootstrap}:")
    for rule, count in failures.items():
        low, high = clopper_pearson(count, args.reps)
        print(f"  {rule:15s} false failures {count}/{args.reps} = {100 * count / args.reps:.1f}% "
              f"(95% CI {100 * low:.1f}-{100 * high:.1f}%)")
    print("  the gate's family-wise level: 2.5% (alpha = (1 - 0.95) / 2)")


if __name__ == "__main__":
    main()
