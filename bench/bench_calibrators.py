"""Benchmark the post-hoc calibrators (issue 26), each measurement in a fresh subprocess.

1. The ImageNet-size job of bench_evaluate.py (50 000 x 1000 test, 10 000 x 1000 validation):
   ``--scores msp,temp,vector,ets,isotonic`` against the default four scores, alternating, in the
   same run; the ratio of the medians is the figure (target: at most 3).
2. ``dirichlet`` fitted on a CIFAR-100-size validation set (10 000 x 100, synthetic, seeded) with
   ``--odir-lambda 0.01 --odir-mu 0.01`` (target: under 30 s).

    python bench/bench_calibrators.py              # both, one run each
    python bench/bench_calibrators.py --runs 3 --only job

The machine may be shared: say so (and give its load, printed here) with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_dumps import bench_dumps, write_dump  # noqa: E402

JOB = """
import json, sys, time
import selcal
start = time.perf_counter()
selcal.evaluate(sys.argv[1], sys.argv[2], scores=tuple(sys.argv[3].split(","))).to_json()
print(json.dumps({"seconds": time.perf_counter() - start}))
"""

DIRICHLET = """
import json, sys, time
import numpy as np, pyarrow.parquet as pq
from selcal.scores.calibrators import fit_dirichlet
from selcal.metrics.exact_sums import single_threaded_blas
from selcal.scores.fits import fit_temperature
table = pq.read_table(sys.argv[1], columns=["label", "logits"])
column = table.column("logits").combine_chunks()
logits = column.values.to_numpy().reshape(-1, column.type.list_size)
labels = table.column("label").to_numpy()
temperature = fit_temperature(logits, labels).temperature
start = time.perf_counter()
with single_threaded_blas():  # as selcal evaluate fits every score
    fit = fit_dirichlet(logits, labels, odir_lambda=0.01, mu=0.01, temperature=temperature)
print(json.dumps({"seconds": time.perf_counter() - start, "iterations": fit.iterations,
                  "gradient_norm": fit.gradient_norm}))
"""


def run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "selcal-bench")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", choices=("job", "dirichlet"), default=None)
    args = parser.parse_args()
    report = {"cpus": os.cpu_count(), "load_before": os.getloadavg()}
    if args.only in (None, "job"):
        test, val = bench_dumps(args.dir, 50_000, 10_000, 1000)  # bench_evaluate.py's job
        default, calibrators = [], []
        for _ in range(args.runs):
            default.append(run(JOB, str(test), str(val), "msp,max_logit,pnorm,temp")["seconds"])
            calibrators.append(run(JOB, str(test), str(val), "msp,temp,vector,ets,isotonic")["seconds"])
        report.update(default_four_seconds=statistics.median(default),
                      calibrators_seconds=statistics.median(calibrators),
                      ratio=statistics.median(calibrators) / statistics.median(default))
    if args.only in (None, "dirichlet"):
        folder = args.dir / "cifar100_val"
        folder.mkdir(parents=True, exist_ok=True)
        val = folder / "val.parquet"
        if not val.exists():
            write_dump(val, 10_000, 100, 1, "val")
        report["dirichlet"] = [run(DIRICHLET, str(val)) for _ in range(args.runs)]
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
