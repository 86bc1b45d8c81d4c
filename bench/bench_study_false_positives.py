"""How often does ``selcal study --baseline`` call two recipes different when they are not? (issue 32)

Each repetition draws one data set (N test rows, default 2000, and N/2 validation rows, K = 10
classes: a label, a margin and a confusing class per row) and six training runs of it from ONE
generator: each run's logits are its own Gaussian noise, the label's margin times a per-row factor
of its own, a pull towards the confusing class, all times a confidence scale of its own (0.8 to
1.25: runs differ in calibration as seeds of one recipe do). The first three runs are recipe
``a``, the last three recipe ``b``: the recipes are exchangeable, so any verdict other than
``same`` is a false positive. Each repetition is judged by ``selcal.study(..., baseline="a",
bootstrap=B)`` on the default metrics (accuracy, msp AURC, msp ECE; Holm over the three):

* the study's interval (the two-level bootstrap with its small-sample correction: the run
  level as s^2/n with Student's t, Welch-Satterthwaite degrees of freedom), and
* for contrast the plain two-level percentile bootstrap (runs and rows drawn with replacement,
  its percentile interval and bootstrap p-value), which the JSON keeps beside it.

The requirement: ``same`` on every judged metric in at least 95% of the repetitions. The rates
are given with their 95% Clopper-Pearson intervals, and per metric the coverage of each 95%
interval of the difference (the share of repetitions where it holds the true difference, 0).

    python bench/bench_study_false_positives.py [--reps 100] [--rows 2000] [--bootstrap 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import selcal
from selcal.figures.data import clopper_pearson

K = 10


def write_runs(folder: Path, repetition: int, n: int, runs: int) -> list[Path]:
    """The 2 x ``runs`` dumps of one repetition (see the module notes)."""
    rows = np.random.default_rng([repetition, 0])
    n_val = n // 2
    total = n + n_val
    labels = rows.integers(0, K, total)
    margin = rows.gamma(3.0, 1.2, total)
    confuser = (labels + rows.integers(1, K, total)) % K
    pull = rows.gamma(1.5, 1.0, total)
    ids = np.array([f"val/{i}" for i in range(n_val)] + [f"test/{i}" for i in range(n)])
    split = np.array(["val"] * n_val + ["test"] * n)
    paths = []
    for index in range(2 * runs):
        recipe, seed = "ab"[index // runs], index % runs
        run = np.random.default_rng([repetition, 1, index])
        logits = run.normal(0.0, 1.0, (total, K))
        logits[np.arange(total), labels] += margin * run.uniform(0.8, 1.2, total)
        logits[np.arange(total), confuser] += pull * run.uniform(0.8, 1.2, total)
        logits *= run.uniform(0.8, 1.25)
        path = folder / f"{recipe}_seed{seed}.parquet"
        pq.write_table(pa.table({"id": ids, "split": split, "label": labels, "logits": pa.FixedSizeListArray.from_arrays(
            pa.array(logits.astype(np.float32).ravel()), K)}), path)
        paths.append(path)
    return paths


def rate(same: int, reps: int) -> dict:
    low, high = clopper_pearson(same, reps)
    return {"same": same, "of": reps, "rate": same / reps, "clopper_pearson_95": [round(float(low), 4),
                                                                                 round(float(high), 4)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3, help="runs per recipe")
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    corrected = plain = 0
    wrong: list[dict] = []
    covered: dict[str, list[int]] = {}  # metric -> [corrected interval holds 0, plain interval holds 0]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="selcal-fp-") as tmp:
        for repetition in range(args.reps):
            folder = Path(tmp) / str(repetition)
            folder.mkdir()
            paths = write_runs(folder, repetition, args.rows, args.runs)
            result = selcal.study([str(p) for p in paths], pattern="{recipe}_seed{seed}.parquet", baseline="a",
                                  bootstrap=args.bootstrap, scores="msp,max_logit", seed=repetition, curves=False)
            judged = [(row, detail["difference"]) for row, detail in zip(result.rows, result.details)
                      if row.get("verdict") is not None]
            assert len(judged) == 3, judged
            corrected += all(row["verdict"] == "same" for row, _ in judged)
            plain += all(detail["plain_verdict"] == "same" for _, detail in judged)
            for row, detail in judged:
                name = f"{row['score'] or ''}.{row['metric']}".lstrip(".")
                plain_ci = detail["plain_percentile"]
                hits = covered.setdefault(name, [0, 0])
                hits[0] += row["diff_low"] <= 0 <= row["diff_high"]
                hits[1] += plain_ci is not None and plain_ci[0] <= 0 <= plain_ci[1]
            wrong += [{"repetition": repetition, "metric": f"{row['score'] or ''}.{row['metric']}".lstrip("."),
                       "verdict": row["verdict"], "p": row["p"]} for row, _ in judged if row["verdict"] != "same"]
    report = {
        "case": f"{args.reps} repetitions, 2 recipes x {args.runs} runs of one generator, {args.rows} test rows, "
                f"K = {K}, --bootstrap {args.bootstrap}, metrics accuracy, msp AURC, msp ECE (Holm)",
        "corrected (selcal study)": rate(corrected, args.reps),
        "plain two-level percentile": rate(plain, args.reps),
        "coverage_of_the_true_difference_0": {name: {"corrected": hits[0] / args.reps, "plain": hits[1] / args.reps}
                                              for name, hits in covered.items()},
        "requirement": "same in at least 95% of repetitions (corrected)",
        "met": corrected >= 0.95 * args.reps,
        "false_positives": wrong,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
