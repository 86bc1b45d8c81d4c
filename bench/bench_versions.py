"""bench_evaluate.py's selcal run, alternated between checkouts of selcal (before/after a change).

Each checkout is a folder holding a ``selcal`` package (e.g. ``git worktree add --detach /tmp/old
COMMIT``); every round runs the floor once, then each checkout (in turn forwards and backwards:
A B, B A, ...), each in a fresh subprocess importing selcal from that folder. Printed: per run the
wall time (imports excluded), the CPU time of the process (user + system, imports included) and
the 1-minute load average; then the medians, the ratio to the floor and the load averages. On a
shared machine the CPU time is the steadier measure: compare medians, never single runs.

    python bench/bench_versions.py /tmp/old /work/main --runs 5
    python bench/bench_versions.py /tmp/old . --stream no    # both read whole (no streaming)
    python bench/bench_versions.py /tmp/old . --scores all   # every score of the registry

Uses the dumps of bench_evaluate.py (written there first if missing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_evaluate import FLOOR, SELCAL  # noqa: E402
from make_dumps import bench_dumps  # noqa: E402


def run(code: str, tree: str | None, *args: str) -> dict:
    """One subprocess; its own report plus its CPU seconds (user + system)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", help="folders that hold a selcal package (checkouts)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "selcal-bench")
    parser.add_argument("--n-test", type=int, default=50_000)
    parser.add_argument("--n-val", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stream", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--scores", default=None, help="e.g. all (default: selcal's default four)")
    args = parser.parse_args()

    test, val = bench_dumps(args.dir, args.n_test, args.n_val, args.classes)

    runs: dict[str, list[dict]] = {tree: [] for tree in args.trees}
    floors, loads = [], []
    for index in range(args.runs):
        loads.append(os.getloadavg()[0])
        floors.append(run(FLOOR, None, str(test), str(val))["seconds"])
        for tree in args.trees if index % 2 == 0 else args.trees[::-1]:
            report = run(SELCAL, tree, str(test), str(val), args.stream, *([args.scores] if args.scores else []))
            runs[tree].append(report)
            print(f"{tree}: {report['seconds']:.2f} s wall, {report['cpu']:.2f} s CPU, {report['peak_mb']:.0f} MB; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    floor = statistics.median(floors)
    summary = {"case": f"test {args.n_test} x {args.classes}, val {args.n_val}, --stream {args.stream}"
                       + (f", --scores {args.scores}" if args.scores else ""),
               "floor_seconds": floor, "load_1min": [round(x, 1) for x in loads]}
    for tree, reports in runs.items():
        seconds = statistics.median(r["seconds"] for r in reports)
        summary[tree] = {"seconds": seconds, "ratio": seconds / floor,
                         "cpu_seconds": statistics.median(r["cpu"] for r in reports),
                         "peak_mb": max(r["peak_mb"] for r in reports)}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
