"""The study tests' synthetic runs (imported by name: tests/study is on the path of its tests): dumps that share their evaluation rows (the data set) and differ by
a run's own noise (its seed), written as Parquet with ids and a split column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def run_logits(n: int, k: int = 5, data_seed: int = 0, run_seed: int = 0, quality: float = 1.0,
               shuffle: float = 0.0):
    """(logits float32 (n, k), labels): one data set's rows (labels and difficulty from
    ``data_seed``) seen by one run (its noise and its scale from ``run_seed``). ``quality`` scales
    the label's margin; ``shuffle`` moves that share of the rows' logits to other rows (a run whose
    confidence is unrelated to those rows' labels)."""
    data = np.random.default_rng(data_seed)
    labels = data.integers(0, k, n)
    margin = data.gamma(3.0, 1.2, n)
    confuser = (labels + data.integers(1, k, n)) % k
    pull = data.gamma(1.5, 1.0, n)
    run = np.random.default_rng([data_seed, run_seed, 7])
    logits = run.normal(0.0, 1.0, (n, k))
    rows = np.arange(n)
    logits[rows, labels] += quality * margin * run.uniform(0.8, 1.2, n)
    logits[rows, confuser] += pull * run.uniform(0.8, 1.2, n)
    logits *= run.uniform(0.8, 1.25)  # the run's own confidence scale (its calibration)
    if shuffle:
        moved = run.choice(n, size=int(round(shuffle * n)), replace=False)
        logits[moved] = logits[run.permutation(moved)]
    return logits.astype(np.float32), labels


def write_run(path: Path, n: int = 600, k: int = 5, data_seed: int = 0, run_seed: int = 0, n_val: int = 200,
              order_seed: int | None = None, **kwargs) -> Path:
    """A run's dump: ``n_val`` validation rows then ``n`` test rows, ids ``val/i`` and ``test/i``;
    ``order_seed`` shuffles the rows in the file (same rows, another order)."""
    logits, labels = run_logits(n + n_val, k, data_seed, run_seed, **kwargs)
    ids = np.array([f"val/{i}" for i in range(n_val)] + [f"test/{i}" for i in range(n)])
    split = np.array(["val"] * n_val + ["test"] * n)
    order = np.arange(n + n_val) if order_seed is None else np.random.default_rng(order_seed).permutation(n + n_val)
    table = pa.table({"id": ids[order], "split": split[order], "label": labels[order],
                      "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits[order].ravel()), k)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def write_study(folder: Path, datasets=("d1",), recipes=("a", "b"), seeds=(0, 1, 2), quality=None, shuffle=None,
                **kwargs) -> list[Path]:
    """``folder/{dataset}/{recipe}_seed{seed}.parquet`` for every combination; ``quality`` and
    ``shuffle``: recipe -> value."""
    paths = []
    for d, dataset in enumerate(datasets):
        for r, recipe in enumerate(recipes):
            for seed in seeds:
                paths.append(write_run(folder / dataset / f"{recipe}_seed{seed}.parquet", data_seed=d,
                                       run_seed=1000 * r + seed, quality=(quality or {}).get(recipe, 1.0),
                                       shuffle=(shuffle or {}).get(recipe, 0.0), **kwargs))
    return paths

