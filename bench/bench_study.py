"""Benchmark ``selcal study --bootstrap 1000`` against ``selcal evaluate`` on the same dumps, in one run.

The case of issue 32: 3 data sets x 4 recipes x 5 seeds = 60 runs of CIFAR size (10 000 test
rows and 5 000 validation rows each, K = 10, 50 and 100 by data set), every run a Parquet dump
with ids and a split column. ``evaluate`` evaluates the 60 dumps (the default scores, every
metric, the JSON written, no bootstrap); ``study`` does the same work and adds the two-level
bootstrap with B = 1000 resamples, the verdicts against a baseline and the tables. Each command
runs in a fresh subprocess (imports excluded from its time), alternating, and reports its wall
time and peak RSS; the medians and the ratio study / evaluate are printed (target: at most 3).

Memory: the study of the one data set of K = 100 alone is run too; the study of all three should
peak near it, since only one data set's runs are held at a time.

    python bench/bench_study.py                 # the case of the issue (dumps written once, reused)
    python bench/bench_study.py --runs 1 --bootstrap 200 --n-test 2000   # a quick look
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_dumps import PEAK_MB  # noqa: E402

DATASETS = {"c10": 10, "c50": 50, "c100": 100}
RECIPES = ("ce", "ls", "focal", "mixup")
SEEDS = range(5)
PATTERN = "{dataset}/{recipe}_seed{seed}.parquet"

EVALUATE = PEAK_MB + """
import glob, selcal
paths = sorted(glob.glob(sys.argv[1] + "/*/*.parquet"))
start = time.perf_counter()
result = selcal.evaluate(paths)
result.to_json()
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak_mb(), "runs": len(paths)}))
"""

STUDY = PEAK_MB + """
import glob, selcal
from selcal.study.render import study_csv, study_latex
paths = sorted(glob.glob(sys.argv[1] + "/" + sys.argv[2] + "/*.parquet"))
start = time.perf_counter()
result = selcal.study(paths, pattern=sys.argv[3], bootstrap=int(sys.argv[4]), baseline="ce", curves=False)
result.to_json(), study_csv(result), study_latex(result)
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak_mb(), "runs": len(paths),
                  "verdicts": sorted({r["verdict"] for r in result.rows if r.get("verdict")})}))
"""


def write_runs(folder: Path, n_test: int, n_val: int) -> Path:
    """The 60 dumps (written once): per data set the same labels and ids; per run its own logits
    (a recipe shifts the label's margin a little, a seed draws the rest)."""
    where = folder / f"study_{n_test}x{n_val}"
    for d, (dataset, k) in enumerate(DATASETS.items()):
        rows = np.random.default_rng(d)
        n = n_val + n_test
        labels = rows.integers(0, k, n)
        margin = rows.gamma(3.0, 2.0, n)
        ids = np.array([f"val/{i:06d}" for i in range(n_val)] + [f"test/{i:06d}" for i in range(n_test)])
        split = np.array(["val"] * n_val + ["test"] * n_test)
        for r, recipe in enumerate(RECIPES):
            for seed in SEEDS:
                path = where / dataset / f"{recipe}_seed{seed}.parquet"
                if path.exists():
                    continue
                run = np.random.default_rng([d, r, seed])
                logits = run.normal(0.0, 1.5, (n, k)).astype(np.float32)
                logits[np.arange(n), labels] += ((1.0 + 0.02 * r) * margin * run.uniform(0.7, 1.3, n)).astype(np.float32)
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(pa.table({"id": ids, "split": split, "label": labels,
                                         "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), k)}),
                               path, compression="zstd")
    return where


def run(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "selcal-bench")
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--n-val", type=int, default=5_000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3, help="measurements of each command (the medians are shown)")
    args = parser.parse_args()
    where = write_runs(args.dir, args.n_test, args.n_val)
    times: dict[str, list] = {"evaluate": [], "study": []}
    peaks: dict[str, list] = {"evaluate": [], "study": [], "study_one_data_set": []}
    for _ in range(args.runs):
        evaluated = run(EVALUATE, where)
        studied = run(STUDY, where, "*", PATTERN, args.bootstrap)
        times["evaluate"].append(evaluated["seconds"])
        times["study"].append(studied["seconds"])
        peaks["evaluate"].append(evaluated["peak_mb"])
        peaks["study"].append(studied["peak_mb"])
    alone = run(STUDY, where / "c100", ".", "{recipe}_seed{seed}.parquet", args.bootstrap)
    peaks["study_one_data_set"].append(alone["peak_mb"])
    median = {k: statistics.median(v) for k, v in times.items()}
    report = {
        "case": f"{len(DATASETS)} data sets x {len(RECIPES)} recipes x {len(SEEDS)} seeds = {evaluated['runs']} runs, "
                f"{args.n_test} test + {args.n_val} val rows, K = {', '.join(map(str, DATASETS.values()))}; "
                f"study --bootstrap {args.bootstrap} --baseline ce",
        "evaluate_s": round(median["evaluate"], 2), "study_s": round(median["study"], 2),
        "ratio": round(median["study"] / median["evaluate"], 2), "target": 3.0,
        "peak_mb": {k: round(statistics.median(v)) for k, v in peaks.items()},
        "verdicts_seen": studied["verdicts"], "runs": args.runs, "machine": platform.machine(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
