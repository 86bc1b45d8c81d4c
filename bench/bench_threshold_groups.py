"""Do the per-group thresholds of `selcal threshold --group-col G / --per-class` keep their promise on
real models? A seeded simulation, measured the way bench_threshold_guarantee.py measures the global one.

For each real dump, the rows of all its splits are pooled; each of S seeded random splits draws
calibration rows and evaluation rows (disjoint) from the pool. On every split, one SGR threshold
per group is certified on the group's calibration rows (`selcal.threshold.groups.certify_groups`,
the command's own core) for the MSP score, and applied to the group's evaluation rows. The promise
(CONVENTIONS.md, "Thresholds per group"): with δ/G per group (Bonferroni, the default), every
group's risk is at most r together with probability at least 1 - δ. Reported per model, target r
and mode:

- ``some group broken``: the fraction of splits in which some group's evaluation risk exceeds r.
  The promise says at most δ; ``p`` is the one-sided binomial p-value of that count under a rate of
  exactly δ (a small p would mean the promise fails beyond binomial noise);
- ``pool``: the same for each group's risk on all its pooled rows (the finite population the
  calibration rows were drawn from, what the guarantee is about; the evaluation rows are the pool
  minus the calibration rows, so their risk is the noisier one);
- ``worst group``: the highest, over the groups, of the fraction of splits that break that group
  (what ``--delta-per-group`` promises to keep at most δ for each group on its own);
- ``abstain``: the mean fraction of the groups with no threshold (too few rows, none qualifying,
  or uncovered); ``coverage``: the median coverage of the rule "each row against its group's
  threshold" on all the evaluation rows;
- for reference, ``global``: one threshold certified on all the calibration rows at δ (what the
  command gives without groups): how often it breaks r in some group, and its median coverage.

Groups: the predicted class (``--per-class``) of three CIFAR-10 models and of HAM10000 (eight skin
lesion classes, four of them predicted a handful of times: groups too small for any guarantee, and
uncovered ones), and the ``source`` column (clean / shifted domain) of the label-smoothing sample.

    python bench/bench_threshold_groups.py                          # 200 splits, delta = 0.1
    python bench/bench_threshold_groups.py --splits 500 --realdata /path/to/realdata

The numbers in docs/guides/thresholds.md come from the default run.
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

from selcal.metrics.selective import risk_coverage  # noqa: E402
from selcal.scores import log_msp  # noqa: E402
from selcal.threshold import guarantee as th  # noqa: E402
from selcal.threshold.groups import certify_groups  # noqa: E402

# (name, files relative to realdata or the repository, grouping, calibration rows, targets)
MODELS = [
    ("markus93_densenet40_c10", ["realdata:markus93_densenet40_c10/val.npz", "realdata:markus93_densenet40_c10/test.npz"],
     "class", 5000, (0.05, 0.1)),
    ("calibrator_cifar10_resnet50_ce", ["realdata:calibrator_cifar10_resnet50_ce/val.npz",
                                        "realdata:calibrator_cifar10_resnet50_ce/test.npz"], "class", 5000, (0.03, 0.05)),
    ("wasscal_cifar10_resnet18_undertrained", ["realdata:wasscal_cifar10_resnet18_undertrained/test.npz"], "class", 5000,
     (0.1, 0.2)),
    ("noisycal_ham10000", ["realdata:noisycal_ham10000/val.npz", "realdata:noisycal_ham10000/test.npz"], "class", 2341,
     (0.2,)),
    ("lspair_alpha0 (source)", ["repo:sample_logits/lspair_alpha0.parquet"], "source", 3000, (0.1, 0.2)),
]
MODES = ("bonferroni", "per-group")


def load(realdata: Path, files: list[str], grouping: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(MSP score as log-MSP, correct, group) of every row of ``files``."""
    scores, correct, groups = [], [], []
    for name in files:
        where, path = name.split(":", 1)
        path = (realdata if where == "realdata" else ROOT) / path
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path).to_pydict()
            logits, labels = np.array(table["logits"], dtype=np.float64), np.array(table["label"])
            group = np.array(table[grouping]) if grouping != "class" else None
        else:
            data = np.load(path)
            logits, labels, group = data["logits"].astype(np.float64), data["labels"], None
        pred = np.argmax(logits, axis=1)
        scores.append(log_msp(logits))
        correct.append(pred == labels)
        groups.append(pred if group is None else group)
    return np.concatenate(scores), np.concatenate(correct), np.concatenate(groups)


def simulate(score, correct, group, n_cal: int, risk: float, delta: float, splits: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    names = np.unique(group)
    out = {mode: {"broken": 0, "pool": 0, "abstain": [], "coverage": [], "per_group": dict.fromkeys(names.tolist(), 0)}
           for mode in MODES}
    out["global"] = {"broken": 0, "coverage": []}
    pool_rows = {name: group == name for name in names.tolist()}
    for _ in range(splits):
        order = rng.permutation(score.size)
        cal, ev = order[:n_cal], order[n_cal:]
        for mode in MODES:
            found = certify_groups(score[cal], correct[cal], group[cal], score[ev], correct[ev], group[ev], risk=risk,
                                   delta=delta, method="sgr", per_group=mode == "per-group")
            row = out[mode]
            broken = [g for g in found if g.evaluation.risk is not None and g.evaluation.risk > risk]
            row["broken"] += bool(broken)
            for g in broken:
                row["per_group"][g.value] += 1
            row["pool"] += any(
                (p := th.apply_threshold(score[pool_rows[g.value]], correct[pool_rows[g.value]], g.threshold)).risk
                is not None and p.risk > risk for g in found if not g.abstain_all)
            row["abstain"].append(sum(g.abstain_all for g in found) / len(found))
            row["coverage"].append(sum(g.evaluation.accepted for g in found) / ev.size)
        cert = th.sgr(risk_coverage(score[cal], correct[cal]), risk=risk, delta=delta)
        accepted = score[ev] >= cert.threshold if cert.threshold is not None else np.zeros(ev.size, bool)
        out["global"]["coverage"].append(float(accepted.mean()))
        out["global"]["broken"] += any(
            (accepted & (group[ev] == name)).any()
            and np.mean(~correct[ev][accepted & (group[ev] == name)]) > risk for name in names.tolist())
    for mode in MODES:
        row = out[mode]
        row["p"] = float(stats.binom.sf(row["broken"] - 1, splits, delta))  # P(count >= broken | rate delta)
        row["worst"] = max(row["per_group"].values()) / splits
        row["abstain"] = statistics.mean(row["abstain"])
        row["coverage"] = statistics.median(row["coverage"])
    out["global"]["coverage"] = statistics.median(out["global"]["coverage"])
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--realdata", type=Path, default=next(  # the shared folder beside the repository (or a worktree)
        (up / "shared" / "realdata" for up in ROOT.parents if (up / "shared" / "realdata").is_dir()),
        ROOT.parent / "shared" / "realdata"))
    parser.add_argument("--splits", type=int, default=200)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"{args.splits} seeded splits per model and target, delta = {args.delta:g}, score msp, method sgr\n")
    print("| model: groups (calibration / evaluation rows) | r | mode | some group broken (p) | pool | worst group "
          "| abstain | coverage | global: broken, coverage |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, files, grouping, n_cal, risks in MODELS:
        score, correct, group = load(args.realdata, files, grouping)
        sizes = np.unique(group, return_counts=True)[1]
        label = (f"{name}: {sizes.size} {'classes' if grouping == 'class' else 'groups'} ({n_cal:,} / "
                 f"{score.size - n_cal:,}; acc {correct.mean():.1%})")
        for risk in risks:
            result = simulate(score, correct, group, n_cal, risk, args.delta, args.splits, args.seed)
            glob = result["global"]
            for mode in MODES:
                row = result[mode]
                print(f"| {label} | {risk:.0%} | {mode} | {row['broken'] / args.splits:.1%} ({row['p']:.2f}) "
                      f"| {row['pool'] / args.splits:.1%} | {row['worst']:.1%} | {row['abstain']:.1%} "
                      f"| {row['coverage']:.1%} | {glob['broken'] / args.splits:.1%}, {glob['coverage']:.1%} |")
                label = ""
        sys.stdout.flush()
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
