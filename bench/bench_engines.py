"""Evaluate many dumps with the local engine and on a local Ray instance; report both times.

Generates ``--models`` seeded synthetic dumps (each with a ``split`` column, so pnorm and temp
are fitted on its ``val`` rows), then times, each in a fresh process, ``selcal evaluate
DUMPS/* --engine local`` and ``--engine ray`` (a local Ray instance with one worker per core,
its start-up included), checks that both wrote the same JSON bytes, and prints the ratio.

    python bench/bench_engines.py                      # 50 dumps of 20 000 x 100
    python bench/bench_engines.py --models 50 --rows 50000 --classes 1000

Needs the ray extra (pip install '.[ray]').
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_dumps import synthetic_logits  # noqa: E402


def write_model(path: Path, rows: int, classes: int, seed: int) -> None:
    logits, labels = map(np.concatenate, zip(*synthetic_logits(rows, classes, seed)))
    split = np.where(np.random.default_rng(seed).random(rows) < 0.2, "val", "test")
    pq.write_table(pa.table({
        "label": pa.array(labels, pa.int64()),
        "split": pa.array(split),
        "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), classes),
    }), path)


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "selcal.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "RAY_ADDRESS": ""})
    if proc.returncode != 0:
        raise SystemExit(f"selcal failed ({proc.returncode}): {proc.stderr.strip()}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--classes", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        dumps = []
        for i in range(args.models):
            dumps.append(folder / f"model{i:03d}.parquet")
            write_model(dumps[-1], args.rows, args.classes, seed=i)
        times = {}
        for engine in ("local", "ray"):
            times[engine] = timed(["evaluate", *map(str, dumps), "--engine", engine, "-q",
                                   "--json", str(folder / f"{engine}.json")])
        same = (folder / "local.json").read_bytes() == (folder / "ray.json").read_bytes()
    print(f"{args.models} dumps of {args.rows} x {args.classes} on {os.cpu_count()} cores: "
          f"local {times['local']:.1f} s, ray {times['ray']:.1f} s (ray / local = {times['ray'] / times['local']:.2f}); "
          f"same JSON bytes: {same}")


if __name__ == "__main__":
    main()
