"""The two-level bootstrap of a data set's runs (CONVENTIONS.md, "Studies"), vectorised.

Each of B resamples draws N evaluation rows with replacement, one draw shared by every run of
the data set, and for every recipe n of its runs with replacement. A run's metrics on the drawn
rows are what :class:`selcal.bootstrap.vectorised.Prepared` computes for a block of resamples
from one sort of each score: each run is prepared once and measured on every block of row
multiplicities, so the work is (runs x B x N) array passes, never a Python call per resample.
The recipe's value on a resample is then the mean over its drawn runs: an index into a
(runs x B) matrix. Memory: the runs of one data set, and one block of multiplicities.

Draws: rows from ``numpy.random.default_rng([seed, h(data set), 0])`` in the blocks of
:func:`selcal.bootstrap.draw_resamples` (over the rows in an order fixed by their content,
:func:`selcal.bootstrap.canonical_order` of every run, so the draw depends neither on the order
of the rows in the files nor on the order of the runs); runs of a recipe from
``default_rng([seed, h(data set), h(recipe), 1])`` as a (B, n) integer array. h is CRC-32 of
the name (UTF-8; no data set: of the empty name), so a data set's or a recipe's draws do not
change when another is added to the study.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..bootstrap.data import RowData
from ..bootstrap.intervals import canonical_order, draw_cluster_counts
from ..bootstrap.resample import Values, draw_resamples, in_order
from ..bootstrap.vectorised import Prepared, row_counts
from ..metrics import catalog

__all__ = ["Wanted", "restrict", "row_seed", "run_seed", "run_draws", "resample_runs", "two_level"]

Wanted = dict  # level ("model" or a score) -> the metric keys wanted at that level


def _name_hash(name: str | None) -> int:
    return zlib.crc32((name or "").encode("utf-8", "surrogatepass"))


def row_seed(seed: int, dataset: str | None) -> list[int]:
    """The seed of the data set's row draws."""
    return [int(seed), _name_hash(dataset), 0]


def run_seed(seed: int, dataset: str | None, recipe: str) -> list[int]:
    """The seed of a recipe's run draws."""
    return [int(seed), _name_hash(dataset), _name_hash(recipe), 1]


def run_draws(n_runs: int, resamples: int, seed) -> np.ndarray:
    """(B, n) indices of the runs drawn, with replacement, on each resample."""
    return np.random.default_rng(seed).integers(0, n_runs, size=(resamples, n_runs), dtype=np.int64)


def restrict(data: RowData, wanted: Wanted) -> RowData:
    """``data`` holding only what the wanted metrics need: the selective metrics' scores, the
    calibration metrics' confidences, the row means, the risks and coverages asked for."""
    selective = set(catalog.section("selective"))
    keep_scores, keep_confidence, means = {}, {}, {}
    risks, coverages = [], []
    for level, keys in wanted.items():
        for key in keys:
            row_key = key if level == "model" else f"{level}.{key}"
            entry = catalog.get(key)
            if row_key in data.row_means:  # NLL, Brier, a score's own accuracy: means of per-row values
                means[row_key] = data.row_means[row_key]
            elif level == "model" or entry is None:  # accuracy and error: always computed
                continue
            elif entry.key in selective and level in data.scores:
                keep_scores[level] = data.scores[level]
                if entry.key == "cov@":
                    risks.append(float(key[len("cov@"):]))
                elif entry.key == "risk@":
                    coverages.append(float(key[len("risk@"):]))
            elif entry.compute is not None and level in data.confidence:
                keep_confidence[level] = data.confidence[level]
    used = set(keep_scores) | set(keep_confidence) | {k.split(".")[0] for k in means if "." in k}
    return replace(data, scores=keep_scores, confidence=keep_confidence, row_means=means,
                   correct_of={k: v for k, v in data.correct_of.items() if k in used},
                   risks=tuple(dict.fromkeys(risks)), coverages=tuple(dict.fromkeys(coverages)))


def resample_runs(datas: Sequence[RowData], wanted: Wanted, resamples: int, seed, workers: int = 1,
                  progress: Callable[[int], None] | None = None) -> list[dict[str, dict[str, np.ndarray]]]:
    """Every run's wanted metrics on each of ``resamples`` row resamples shared by all of them.

    ``datas``: the runs' rows, aligned (row i of each is the same evaluation row). Returns, per
    run, ``{level: {key: (B,)}}`` (NaN where a value is undefined on a resample). The blocks of
    resamples run on up to ``workers`` threads (:func:`selcal.bootstrap.resample.in_order`: the
    same numbers on any number). ``progress(done)``: resamples done.
    """
    datas = [restrict(data, wanted) for data in datas]
    order = canonical_order(*datas)
    keys = frozenset(key for keys in wanted.values() for key in keys)
    levels = tuple(level for level in wanted if level != "model")
    prepared = [Prepared(data.take(order), scores=levels, keys=keys) for data in datas]
    values = [Values(resamples) for _ in datas]
    n, bins = datas[0].n, max(data.bins for data in datas)
    clusters = datas[0].clusters
    if clusters is not None:  # pixel rows: whole images are drawn, the same for every run
        blocks = draw_cluster_counts(clusters[order], resamples, seed, bins)
    else:
        blocks = (row_counts(draws, n) for draws in draw_resamples(n, resamples, seed, bins))
    def measure(counts: np.ndarray) -> list:
        return [run.metrics_of_counts(counts) for run in prepared]

    done = 0
    for counts, measured in in_order(measure, blocks, workers):
        for block, into in zip(measured, values):
            into.add({level: {k: v for k, v in metrics.items() if k in wanted.get(level, ())}
                      for level, metrics in block.items()})
        done += counts.shape[0]
        if progress is not None:
            progress(done)
    return [value.values for value in values]


def two_level(per_run: np.ndarray, draws: np.ndarray | None) -> np.ndarray:
    """A recipe's value on each resample: the mean over its drawn runs of their value on that
    resample's rows. ``per_run``: (n, B), run j's value on resample b; ``draws``: (B, n) run
    indices (:func:`run_draws`), or None for every run once (the row level alone).

    >>> per_run = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> two_level(per_run, np.array([[0, 0], [1, 0]])).tolist(), two_level(per_run, None).tolist()
    ([1.0, 3.0], [2.0, 3.0])
    """
    if draws is None:
        return per_run.mean(axis=0)
    columns = np.arange(per_run.shape[1])[:, None]
    return per_run[draws, columns].mean(axis=1)
