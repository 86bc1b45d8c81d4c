"""Seeded synthetic logit dumps with realistic structure, for the benchmarks.

Logits: a per-row "difficulty" scales a class-prototype signal plus Gaussian noise, so that
accuracy (about 75%), confidence spread and ties resemble an ImageNet classifier's.

    python bench/make_dumps.py OUT_DIR --n-test 50000 --n-val 10000 --classes 1000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def synthetic_logits(n: int, n_classes: int, seed: int, rows_per_block: int = 8192):
    """Yield (logits float32 block, labels) with about 75% top-1 accuracy."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, rows_per_block):
        m = min(rows_per_block, n - start)
        labels = rng.integers(0, n_classes, size=m)
        logits = rng.standard_normal((m, n_classes), dtype=np.float32) * 1.5
        margin = rng.gamma(3.0, 2.5, size=m).astype(np.float32)
        confusers = rng.integers(0, n_classes, size=m)
        logits[np.arange(m), labels] += margin
        logits[np.arange(m), confusers] += rng.gamma(2.0, 1.6, size=m).astype(np.float32)
        yield logits, labels


# The peak RSS of a benchmark's child process, as source its code strings start with: VmHWM, not
# ru_maxrss (ru_maxrss keeps the parent's peak across fork + exec).
PEAK_MB = """
import json, sys, time


def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

"""


def write_dump(path: Path, n: int, n_classes: int, seed: int, split: str, row_group_rows: int = 8192) -> None:
    writer = None
    offset = 0
    for logits, labels in synthetic_logits(n, n_classes, seed, row_group_rows):
        m = len(labels)
        table = pa.table({
            "id": pa.array([f"{split}/{i:08d}" for i in range(offset, offset + m)]),
            "label": pa.array(labels, pa.int64()),
            "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), n_classes),
        })
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table, row_group_size=row_group_rows)
        offset += m
    writer.close()


def bench_dumps(folder: Path, n_test: int, n_val: int, n_classes: int, *, say=None) -> tuple[Path, Path]:
    """The benchmark case's test and validation dumps in ``folder/{n_test}x{n_classes}``, written
    once (seeds 0 and 1, row groups of about 8 MiB of logits) and reused by every later run."""
    where = Path(folder) / f"{n_test}x{n_classes}"
    where.mkdir(parents=True, exist_ok=True)
    test, val = where / "test.parquet", where / "val.parquet"
    rows_per_group = max(256, min(8192, (1 << 23) // n_classes))
    for path, n, seed, split in ((test, n_test, 0, "test"), (val, n_val, 1, "val")):
        if not path.exists():
            if say is not None:
                say(f"writing {path} ...")
            write_dump(path, n, n_classes, seed, split, rows_per_group)
    return test, val


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--n-test", type=int, default=50_000)
    parser.add_argument("--n-val", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_dump(args.out / "test.parquet", args.n_test, args.classes, args.seed, "test")
    write_dump(args.out / "val.parquet", args.n_val, args.classes, args.seed + 1, "val")
    print(f"wrote {args.out}/test.parquet ({args.n_test} x {args.classes}) and val.parquet ({args.n_val})")


if __name__ == "__main__":
    main()
