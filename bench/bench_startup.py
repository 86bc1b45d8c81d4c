"""How fast the command starts: ``selcal --help``, ``selcal --version`` and a shell completion
against ``python -c "import numpy, typer"`` (the floor: selcal needs both), as a ratio.

Each command runs in a fresh interpreter ``--runs`` times, alternating with the others so that a
burst of load on a shared machine hits every side alike; the best time of each is kept (the one
least disturbed by other processes). The goal (issue 37): ``selcal --help`` and ``selcal --version``
at most 2 (a command's own help and a completion are shown too; a completion should take no longer
than ``--help``).

    python bench/bench_startup.py             # 7 runs of each
    python bench/bench_startup.py --runs 15

Run it from the repository root (or with selcal installed); it prints the machine's load beside
the figures, and exits 1 when a ratio is above ``--limit``. The children may write bytecode caches
(``PYTHONDONTWRITEBYTECODE`` is dropped for them): an installed package has its modules compiled
(pip does it at install), so a start that compiles selcal's sources each time is not what a user sees.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

FLOOR = [sys.executable, "-c", "import numpy, typer"]
SELCAL = [sys.executable, "-m", "selcal.cli"]
COMMANDS = {
    "selcal --help": (SELCAL + ["--help"], {}),
    "selcal --version": (SELCAL + ["--version"], {}),
    "selcal evaluate --help": (SELCAL + ["evaluate", "--help"], {}),
    # what bash runs on <TAB> after `selcal evaluate --aurc-estimator ` (typer's completion protocol)
    "completion (bash)": (SELCAL, {"_SELCAL_COMPLETE": "complete_bash", "COMP_WORDS": "selcal evaluate --aurc-estimator ",
                                   "COMP_CWORD": "3"}),
}


def timed(argv: list[str], env: dict) -> float:
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env={**environment, **env})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode().strip()}")
    return elapsed


def measure(runs: int) -> dict[str, float]:
    """The best of ``runs`` wall times of the floor and of every command, run in turn."""
    sides = {"floor": (FLOOR, {}), **COMMANDS}
    for argv, env in sides.values():  # once each, unmeasured: the files are in the page cache
        timed(argv, env)
    best = {name: float("inf") for name in sides}
    for _ in range(runs):
        for name, (argv, env) in sides.items():
            best[name] = min(best[name], timed(argv, env))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (the best is kept)")
    parser.add_argument("--limit", type=float, default=2.0, help="the largest ratio accepted")
    args = parser.parse_args()
    best = measure(args.runs)
    floor = best.pop("floor")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average (1 min) {load:.2f} on {os.cpu_count()} CPUs; best of {args.runs} runs each")
    print(f"  {'python -c ' + repr(FLOOR[2]):<28} {floor * 1000:7.0f} ms")
    for name, seconds in best.items():
        print(f"  {name:<28} {seconds * 1000:7.0f} ms   ratio {seconds / floor:.2f}")
    required = max(best["selcal --help"], best["selcal --version"]) / floor
    print(f"ratio: selcal --help {best['selcal --help'] / floor:.2f}, selcal --version "
          f"{best['selcal --version'] / floor:.2f} (limit {args.limit:g})")
    return 0 if required <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
