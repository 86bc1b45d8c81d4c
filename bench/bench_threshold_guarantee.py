"""Does `selcal threshold` keep its promise on real models? A seeded simulation.

For each real dump (shared realdata: logits + labels, or ImageNet top-1 confidences), the rows
of all its splits are pooled; each of S seeded random splits draws calibration rows and
evaluation rows (disjoint) from the pool. On every split each method picks its threshold
for the MSP score on the calibration rows, and the threshold is applied to the evaluation
rows. Reported per model, target r and method:

- ``broken``: the fraction of splits whose evaluation risk exceeds r. The guarantee says at
  most δ; ``p`` is the one-sided binomial p-value of that count under a rate of exactly δ
  (a small p would mean the guarantee fails beyond binomial noise);
- ``pool``: the same fraction for the risk of the threshold on the whole pool, the finite
  population the calibration rows were drawn from (what the guarantee is about). The
  evaluation rows are the pool minus the calibration rows, so a calibration set with few
  errors above θ leaves the evaluation rows with more: their risk is noisier than the pool's,
  and ``broken`` overstates the failures of the guarantee a little;
- ``abstain``: the fraction of splits with no threshold (abstain on everything);
- ``ltt-testable``: LTT whose sequence starts at the first coverage with enough rows for a
  test to reject (``selcal.threshold.guarantee.ltt(testable_only=True)``, not monotone in δ);
- ``coverage``: the median evaluation coverage reached (0 for a split that abstains);
- for reference, ``empirical``: the ``cov@r`` threshold of the calibration rows applied to
  the evaluation rows (no guarantee), and ``cov@r (eval)``: the median ``cov@r`` of the
  evaluation rows themselves, the coverage the target allows in hindsight.

    python bench/bench_threshold_guarantee.py                         # 200 splits, delta = 0.1
    python bench/bench_threshold_guarantee.py --splits 500 --realdata /path/to/realdata

The numbers in the README come from the default run (about a minute on one core).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selcal.threshold import guarantee as th  # noqa: E402
from selcal.scores import log_msp  # noqa: E402
from selcal.metrics.selective import coverage_at_risk, risk_coverage  # noqa: E402

# (name, files relative to realdata, calibration rows): the pool is every row of the files
MODELS = [
    ("markus93_densenet40_c10", ["markus93_densenet40_c10/val.npz", "markus93_densenet40_c10/test.npz"], 5000),
    ("wasscal_cifar100_resnet56", ["wasscal_cifar100_resnet56/test.npz"], 5000),
    ("imagenet tv_resnet101 (top-1)", ["hollance_imagenet_top1/tv_resnet101.npz"], 10000),
]
METHODS = ("sgr", "ltt", "ltt-testable", "empirical")  # ltt-testable: ltt(testable_only=True), Python only


def load(realdata: Path, files: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(MSP score as log-MSP, correct) of every row of ``files``."""
    scores, correct = [], []
    for name in files:
        data = np.load(realdata / name)
        if "logits" in data:
            logits = data["logits"].astype(np.float64)
            scores.append(log_msp(logits))
            correct.append(np.argmax(logits, axis=1) == data["labels"])
        else:  # top-1 only: the MSP itself
            scores.append(np.log(data["confidence"].astype(np.float64)))
            correct.append(data["pred"] == data["labels"])
    return np.concatenate(scores), np.concatenate(correct)


def simulate(score, correct, n_cal: int, risk: float, delta: float, splits: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {method: {"broken": 0, "pool": 0, "abstain": 0, "coverage": []} for method in METHODS}
    hindsight = []
    for _ in range(splits):
        order = rng.permutation(score.size)
        cal, ev = order[:n_cal], order[n_cal:]
        curve = risk_coverage(score[cal], correct[cal])
        hindsight.append(coverage_at_risk(risk_coverage(score[ev], correct[ev]), risk))
        for method in METHODS:
            if method == "ltt-testable":
                cert = th.ltt(curve, risk=risk, delta=delta, testable_only=True)
            else:
                cert = th.certify(curve, risk=risk, delta=delta, method=method)
            applied = th.apply_threshold(score[ev], correct[ev], cert.threshold)
            row = out[method]
            row["abstain"] += cert.abstain_all
            row["broken"] += applied.risk is not None and applied.risk > risk
            pool = th.apply_threshold(score, correct, cert.threshold)
            row["pool"] += pool.risk is not None and pool.risk > risk
            row["coverage"].append(applied.coverage)
    for row in out.values():
        row["p"] = float(stats.binom.sf(row["broken"] - 1, splits, delta))  # P(count >= broken | rate delta)
        row["coverage"] = statistics.median(row["coverage"])
    out["hindsight"] = statistics.median(hindsight)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--realdata", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "realdata")
    parser.add_argument("--splits", type=int, default=200)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--risks", default="0.01,0.05")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    risks = [float(r) for r in args.risks.split(",")]
    start = time.perf_counter()
    print(f"{args.splits} seeded splits per model and target, delta = {args.delta:g}, score msp\n")
    print("| model (calibration / evaluation rows) | r | method | broken (p) | pool | abstain | median coverage "
          "| cov@r (eval) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, files, n_cal in MODELS:
        score, correct = load(args.realdata, files)
        label = f"{name} ({n_cal:,} / {score.size - n_cal:,}; acc {correct.mean():.1%})"
        for risk in risks:
            result = simulate(score, correct, n_cal, risk, args.delta, args.splits, args.seed)
            for method in METHODS:
                row = result[method]
                broken = f"{row['broken'] / args.splits:.1%}" + (f" ({row['p']:.2f})" if method != "empirical" else "")
                print(f"| {label} | {risk:.0%} | {method} | {broken} | {row['pool'] / args.splits:.1%} "
                      f"| {row['abstain'] / args.splits:.1%} "
                      f"| {row['coverage']:.1%} | {result['hindsight']:.1%} |")
                label = ""
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
