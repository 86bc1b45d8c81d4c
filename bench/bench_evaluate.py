"""Benchmark `selcal evaluate` against the floor, in the same run on the same machine.

The floor is the least any tool must do: read the test and validation Parquet files into
numpy with pyarrow and run one float32 softmax + argmax pass. selcal does everything
(all four scores, p grid 1..10, exact temperature, every metric, no plots), and again with
every score of the registry (``--scores all``). Each measurement runs in a fresh subprocess,
floor, selcal and selcal with every score alternating, and reports its own wall time and CPU
time (imports excluded) and peak RSS. The times reported are the **best of the runs** (issue 34:
the median floor swung between 0.7 and 2.7 s from run to run, first-touch page faults of 1.3 GB
and other work on a shared machine only ever add time, so the least of several runs is the
repeatable figure), with each side's spread (worst / best) and the load average beside them; two ratios are printed: ``ratio`` (the
default path against the floor; target 1.5) and ``all_scores_ratio`` (every score against
the default four; target 2), and ``cpu_ratio`` (the same on CPU time).

    python bench/bench_evaluate.py                      # everyday case: 50 000 x 1000 + 10 000 x 1000
    python bench/bench_evaluate.py --n-test 2000000 --stream   # the big case, streamed
    python bench/bench_evaluate.py --n-test 20000 --n-val 2000 --classes 128000 --stream  # wide
    python bench/bench_evaluate.py --no-all                     # without the run of every score

Dumps are generated once (seeded, see make_dumps.py) into --dir and reused.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_dumps import PEAK_MB, bench_dumps  # noqa: E402

# pyarrow imports pandas on its first conversion to numpy (0.4 s): an import, excluded on both sides.
IMPORT_PANDAS = """
try:
    import pandas  # noqa: F401
except ImportError:
    pass
"""

FLOOR = PEAK_MB + IMPORT_PANDAS + """
import numpy as np, pyarrow.parquet as pq
start, cpu = time.perf_counter(), time.process_time()
for path in sys.argv[1:3]:
    table = pq.read_table(path, columns=["label", "logits"])
    column = table.column("logits").combine_chunks()
    logits = column.values.to_numpy().reshape(-1, column.type.list_size)
    labels = table.column("label").to_numpy()
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    accuracy = float((probabilities.argmax(axis=1) == labels).mean())
print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                  "peak_mb": peak_mb()}))
"""

SELCAL = PEAK_MB + IMPORT_PANDAS + """
import selcal
# Imports excluded, as for the floor: selcal loads its modules and scipy's when first used (selcal.evaluate,
# scipy.optimize in smooth ECE's search), which moved 1.1 s of imports into the timed work after 8f5d8e6.
evaluate = selcal.evaluate
import scipy.optimize, scipy.special, scipy.stats  # noqa: E401,F401
try:  # modules the job first uses (25 ms), imported beforehand like the rest
    import selcal.report.leaderboard, selcal.report.confident_errors, threadpoolctl  # noqa: E401,F401
except ImportError:  # an older checkout (bench_versions.py)
    pass
stream = {"auto": None, "yes": True, "no": False}[sys.argv[3]]
start, cpu = time.perf_counter(), time.process_time()
scores = tuple(sys.argv[4].split(",")) if len(sys.argv) > 4 else None
result = evaluate(sys.argv[1], sys.argv[2], stream=stream, **({"scores": scores} if scores else {}))
result.to_json()
print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                  "peak_mb": peak_mb()}))
"""


def run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "selcal-bench")
    parser.add_argument("--n-test", type=int, default=50_000)
    parser.add_argument("--n-val", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stream", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--scores", default=None, help="selcal's --scores (default: the default four; 'all': every score)")
    parser.add_argument("--no-all", action="store_true", help="skip the run with every score (--scores all)")
    parser.add_argument("--no-floor", action="store_true", help="skip the floor (it cannot hold a dump larger than RAM)")
    args = parser.parse_args()

    test, val = bench_dumps(args.dir, args.n_test, args.n_val, args.classes, say=lambda line: print(line, flush=True))

    floors, selcals, alls = [], [], []
    for _ in range(args.runs):
        if not args.no_floor:
            floors.append(run(FLOOR, str(test), str(val)))
        selcals.append(run(SELCAL, str(test), str(val), args.stream, *([args.scores] if args.scores else [])))
        if not args.no_all and args.scores is None:
            alls.append(run(SELCAL, str(test), str(val), args.stream, "all"))
    machine = f"{platform.machine()}, {platform.processor() or 'cpu'}, {__import__('os').cpu_count()} cores"
    report = {
        "case": f"test {args.n_test} x {args.classes}, val {args.n_val} x {args.classes}, float32"
                + (f", --scores {args.scores}" if args.scores else ""),
        "machine": machine,
        "load_average": __import__("os").getloadavg()[0],
        "times": f"best of {args.runs} runs",
        "selcal_seconds": min(r["seconds"] for r in selcals),
        "selcal_cpu_seconds": min(r["cpu_seconds"] for r in selcals),
        "selcal_spread": max(r["seconds"] for r in selcals) / min(r["seconds"] for r in selcals),
        "selcal_peak_mb": max(r["peak_mb"] for r in selcals),
        "selcal_microseconds_per_test_row": 1e6 * min(r["seconds"] for r in selcals) / args.n_test,
    }
    if floors:
        report["floor_seconds"] = min(r["seconds"] for r in floors)
        report["floor_cpu_seconds"] = min(r["cpu_seconds"] for r in floors)
        report["floor_spread"] = max(r["seconds"] for r in floors) / report["floor_seconds"]
        report["floor_peak_mb"] = max(r["peak_mb"] for r in floors)
        report["ratio"] = report["selcal_seconds"] / report["floor_seconds"]
        report["cpu_ratio"] = report["selcal_cpu_seconds"] / report["floor_cpu_seconds"]
    if alls:
        report["all_scores_seconds"] = min(r["seconds"] for r in alls)
        report["all_scores_peak_mb"] = max(r["peak_mb"] for r in alls)
        report["all_scores_ratio"] = report["all_scores_seconds"] / report["selcal_seconds"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
