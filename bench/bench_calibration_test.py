"""Benchmark ``--calibration-test M``: the same evaluation with and without it, in one run.

The case of issue 35: ``selcal evaluate`` of the 10 000-row sample (calibrator_cifar10_resnet50_ce, the
default four scores, two of them with probabilities) against the same with ``--calibration-test 1000``.
Each measurement runs in a fresh subprocess, the two alternating, and reports

* ``command``: the whole ``selcal evaluate FILE --json OUT`` as a user runs it (interpreter start, imports,
  evaluation, JSON), wall time; the target is ``command_ratio`` <= 2;
* ``library``: ``selcal.evaluate(FILE)`` and ``to_json()`` after the imports, wall and CPU time (the
  evaluation alone is a fraction of a second, so this ratio is the test's own cost against it).

Medians over ``--runs``; the machine's load (``os.getloadavg``) before and after is printed beside them:
on a shared machine, read the CPU seconds.

    python bench/bench_calibration_test.py            # M = 1000, 5 runs of each
    python bench/bench_calibration_test.py --draws 200 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_logits" / "calibrator_cifar10_resnet50_ce.parquet"

LIBRARY = """
import json, sys, time
import selcal
wall, cpu = time.perf_counter(), time.process_time()
result = selcal.evaluate(sys.argv[1], calibration_test=int(sys.argv[2]))
result.to_json()
print(json.dumps({"seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}))
"""


def command(draws: int, out: str) -> float:
    """Wall time of the whole command line, from the interpreter's start."""
    argv = [sys.executable, "-m", "selcal.cli", "evaluate", str(SAMPLE), "--json", out, "--quiet"]
    if draws:
        argv += ["--calibration-test", str(draws)]
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def library(draws: int) -> dict:
    out = subprocess.run([sys.executable, "-c", LIBRARY, str(SAMPLE), str(draws)], check=True, capture_output=True,
                         text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "result.json")
        plain_cmd, test_cmd, plain_lib, test_lib = [], [], [], []
        for _ in range(args.runs):
            plain_cmd.append(command(0, out))
            test_cmd.append(command(args.draws, out))
            plain_lib.append(library(0))
            test_lib.append(library(args.draws))
    median = statistics.median
    report = {
        "case": f"selcal evaluate {SAMPLE.name} (10 000 rows, 4 scores), --calibration-test {args.draws}",
        "runs": args.runs,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "command_seconds": round(median(plain_cmd), 3),
        "command_seconds_with_test": round(median(test_cmd), 3),
        "command_ratio": round(median(test_cmd) / median(plain_cmd), 3),
        "library_seconds": round(median(r["seconds"] for r in plain_lib), 3),
        "library_seconds_with_test": round(median(r["seconds"] for r in test_lib), 3),
        "library_cpu_seconds": round(median(r["cpu_seconds"] for r in plain_lib), 3),
        "library_cpu_seconds_with_test": round(median(r["cpu_seconds"] for r in test_lib), 3),
    }
    report["library_ratio"] = round(report["library_seconds_with_test"] / report["library_seconds"], 3)
    report["test_cpu_seconds"] = round(report["library_cpu_seconds_with_test"] - report["library_cpu_seconds"], 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
