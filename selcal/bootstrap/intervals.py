"""Intervals of a model or a result: the row bootstrap, refits (``--bootstrap-refit``), the cluster
bootstrap of segmentation images; :func:`add_intervals` adds them to an :class:`EvaluationResult`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..errors import SelcalError
from ..metrics import catalog
from ..results import EvaluationResult, ModelResult, to_jsonable
from ..scores import REGISTRY, fitted as fitted_scores
from .data import RefitData, RowData
from .resample import (DEFAULT_CONFIDENCE, Values, block_size, check_arguments, draw_resamples, in_order,
                       percentile_interval, stack_blocks, threads)
from .vectorised import Prepared, row_counts
from ..options import DEFAULT_RESAMPLES, DEFAULT_SEED


# --------------------------------------------------------------------------- refit
def refit_metrics(refit: RefitData, options, eval_draws: np.ndarray, val_draws: np.ndarray,
                  scores: tuple[str, ...] | None = None,
                  progress: Callable[[int], None] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Metrics of the fitted scores when they are refitted on every resample.

    ``scores``: the fitted scores to refit (default: every fitted score of ``options``).
    Resample i is literally :func:`selcal.api.measure_arrays` fitted on the validation rows
    ``val_draws[i]`` and measured on the evaluation rows ``eval_draws[i]`` (one full
    evaluation per resample: slow, but the same code as the point estimate). Also returns
    each resample's temperature. ``progress(i)`` is called after the i-th resample.
    """
    from ..pipeline.measure import measure_arrays

    wanted = tuple(s for s in fitted_scores(options.scores if scores is None else scores) if s in options.scores)
    fit_options = replace(options, scores=wanted, calibration_test=0)  # (the test is of the point estimate only)
    labels = np.asarray(refit.labels, dtype=np.int64)
    val_labels = np.asarray(refit.val_labels, dtype=np.int64)
    blocks = []
    for i in range(len(eval_draws)):  # (a cluster resample's draws differ in length: a list)
        model = measure_arrays(refit.logits[eval_draws[i]], labels[eval_draws[i]],
                                refit.val_logits[val_draws[i]], val_labels[val_draws[i]], options=fit_options)
        blocks.append({name: {key: np.array([np.nan if model.scores[name][key] is None else model.scores[name][key]],
                                            dtype=np.float64)
                              for key in _interval_keys(name, model.scores[name])}
                       for name in wanted})
        if progress is not None:
            progress(i + 1)
    return stack_blocks(blocks)


def _interval_keys(name: str, metrics: dict[str, Any]) -> list[str]:
    """The keys of a score's metrics that get an interval when it is refitted (and the fitted
    values its registry entry names, e.g. the temperature)."""
    return [k for k in metrics if catalog.has_interval(k) or k in REGISTRY[name].interval_keys]


# ---------------------------------------------------------------------- intervals
def _all_metrics(data: RowData, resamples: int, seed: int, refit: RefitData | None,
                 options, progress: Callable[[int], None] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Every metric on ``resamples`` resamples; fitted scores refitted when ``refit`` is given.

    ``progress(done)`` is called with the number of resamples done (after each block, and
    after each refitted resample)."""
    if data.clusters is not None:
        return _cluster_metrics(data, resamples, seed, refit, options)
    fitted = fitted_scores(data.scores) if refit is not None else ()
    order = canonical_order(data)
    prepared = Prepared(data.take(order), tuple(s for s in data.scores if s not in fitted))
    val_rng = np.random.default_rng([seed, 1])
    val_order = validation_order(refit) if fitted else None
    values = Values(resamples)
    done = 0
    # a block's arrays are resamples x max(rows, bins, smooth ECE's grid): with few rows, smooth ECE's
    # grid of up to 4096 points sets the block (60 rows gave blocks of 4 369 resamples, about 1 GB of grids)
    width = max(data.bins, catalog.SMOOTH_RESAMPLE["max_grid"]) if data.confidence else data.bins
    blocks = draw_resamples(data.n, resamples, seed, width)
    for draws, block in in_order(prepared.metrics, blocks, 1 if fitted else threads(options or data.options)):
        if fitted:
            n_val = val_order.size
            val_draws = val_rng.integers(0, n_val, size=(draws.shape[0], n_val), dtype=np.int64)
            block.update(refit_metrics(refit, options, order[draws], val_order[val_draws], fitted,
                                       progress=None if progress is None else lambda i, d=done: progress(d + i)))
        values.add(block)
        done += draws.shape[0]
        if progress is not None:
            progress(done)
    return values.values


def validation_order(refit: RefitData) -> np.ndarray:
    """An order of the validation rows fixed by their content (logits and label), not their file order.

    The validation resamples of ``--bootstrap-refit`` are drawn in this order, as the
    evaluation resamples are drawn in :func:`canonical_order`. Rows are sorted by a 64-bit
    hash of their content: rows with equal hashes are (but for a 2**-64 chance) equal rows,
    interchangeable for every fit.
    """
    from ..pipeline.split import row_hashes

    logits = np.asarray(refit.val_logits)
    return np.argsort(row_hashes(logits, np.asarray(refit.val_labels, dtype=np.int64), 0), kind="stable")


# ------------------------------------------------------------------- cluster bootstrap
def draw_cluster_counts(clusters: np.ndarray, resamples: int, seed: int, bins: int = 0):
    """Yield blocks of resamples as row multiplicities (block, n): each resample draws as many
    clusters as there are, with replacement, and every row counts as often as its cluster.

    Clusters are numbered in a fixed order (for pixel rows: images in the order of their
    ids), so the draw depends on which rows form which cluster, not on the row order.
    """
    present, cluster_of_row = np.unique(clusters, return_inverse=True)
    n_clusters = present.size
    rng = np.random.default_rng(seed)
    block = block_size(max(cluster_of_row.size, bins))
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters), dtype=np.int64)
        cluster_counts = row_counts(draws, n_clusters)
        yield cluster_counts[:, cluster_of_row]


def _cluster_metrics(data: RowData, resamples: int, seed: int, refit, options=None) -> dict[str, dict[str, np.ndarray]]:
    """:func:`_all_metrics` for clustered rows (pixels of images): whole images are resampled."""
    fitted = fitted_scores(data.scores) if refit is not None else ()
    if fitted and (refit.clusters is None or refit.val_clusters is None):
        raise SelcalError("--bootstrap-refit on pixel rows needs the images of the validation pixels")
    order = canonical_order(data)
    ordered = data.take(order)
    prepared = Prepared(ordered, tuple(s for s in data.scores if s not in fitted))
    values = Values(resamples)  # one float64 per metric and resample, as in _all_metrics
    if fitted:  # validation images, redrawn whole with their own generator (as the rows are in _all_metrics)
        val_images, val_image_of_row = np.unique(refit.val_clusters, return_inverse=True)
        val_rows_of = np.split(np.argsort(val_image_of_row, kind="stable"),
                               np.cumsum(np.bincount(val_image_of_row))[:-1])
        val_rng = np.random.default_rng([seed, 1])
    rows = np.arange(data.n)
    blocks = draw_cluster_counts(ordered.clusters, resamples, seed, data.bins)
    for counts, block in in_order(prepared.metrics_of_counts, blocks, 1 if fitted else threads(options or data.options)):
        if fitted:
            eval_draws = [order[np.repeat(rows, c)] for c in counts]
            val_draws = [np.concatenate([val_rows_of[j] for j in val_rng.integers(0, val_images.size,
                                                                                  size=val_images.size)])
                         for _ in counts]
            block.update(refit_metrics(refit, options, eval_draws, val_draws, fitted))
        values.add(block)
    return values.values


def canonical_order(*datas: RowData) -> np.ndarray:
    """An order of the rows that depends only on their content, not on their order in the file.

    Resample indices are drawn in this order, so the intervals do not depend on row order
    either (rows equal in every per-row value are interchangeable for every metric).
    With several data sets (paired rows), their values are compared together.
    """
    keys = []
    for data in datas:
        keys.append(data.correct)
        keys += [data.scores[k] for k in sorted(data.scores)]
        keys += [data.confidence[k] for k in sorted(data.confidence)]
        keys += [data.row_means[k] for k in sorted(data.row_means)]
        keys += [data.correct_of[k] for k in sorted(data.correct_of)]
    return np.lexsort(keys[::-1])


def model_intervals(model: ModelResult, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                    confidence: float = DEFAULT_CONFIDENCE, options=None,
                    refit: RefitData | None = None,
                    progress: Callable[[int], None] | None = None) -> dict[str, dict[str, list[float] | None]]:
    """Percentile intervals of every metric of one model: ``{"model": {...}, score: {...}}``.

    ``refit``: the model's logits, to refit the fitted scores on every resample (see the module notes).
    """
    from ..options import Options

    options = options or Options()
    return row_intervals(RowData.from_model(model, options), resamples=resamples, seed=seed,
                         confidence=confidence, refit=refit, options=options, progress=progress)


def row_intervals(data: RowData, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, confidence: float = DEFAULT_CONFIDENCE,
                  refit: RefitData | None = None, options=None,
                  progress: Callable[[int], None] | None = None) -> dict[str, dict[str, list[float] | None]]:
    """Percentile intervals of every metric from per-row arrays (see :func:`model_intervals`).

    Examples
    --------
    >>> data = RowData(correct=np.arange(100) % 4 > 0, scores={"s": np.arange(100.0)})
    >>> low, high = row_intervals(data, resamples=200)["model"]["accuracy"]
    >>> bool(low < 0.75 < high)
    True
    """
    check_arguments(resamples, confidence)
    values = _all_metrics(data, resamples, seed, refit, options, progress)
    return {level: {m: percentile_interval(v, confidence) for m, v in metrics.items()}
            for level, metrics in values.items()}


def group_intervals(model: ModelResult, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                    confidence: float = DEFAULT_CONFIDENCE, options=None) -> None:
    """Intervals of every per-group metric (``--group-col`` with ``--bootstrap``), resampling within each
    group: each group's rows are resampled on their own (B resamples of its n rows, drawn from the seed
    ``SeedSequence([seed, g])`` of the g-th group in the order of ``model.extra["groups"]``), so a group's
    interval is that of its own rows, whatever the other groups' sizes. The group's dict gets
    ``"ci": {"accuracy": [low, high]}`` and each of its scores ``"ci": {metric: [low, high] | None}``, the
    form of the model's intervals. The fitted scores keep their fit (never refitted per group)."""
    groups = model.extra.get("groups")
    if not groups or getattr(model, "groups", None) is None or model.rows is None:
        return
    from ..options import Options

    options = options or Options()
    data = replace(RowData.from_model(model, options), confidence={}, row_means={})  # selective metrics, accuracy
    labels = np.asarray(model.groups)
    for index, (group, values) in enumerate(groups.items()):
        members = np.flatnonzero(labels == group)
        if not members.size:
            continue
        group_seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        intervals = row_intervals(data.take(members), resamples=resamples, seed=group_seed, confidence=confidence,
                                  options=options)
        values["ci"] = {"accuracy": intervals.get("model", {}).get("accuracy")}
        for name, metrics in values.get("scores", {}).items():
            found = intervals.get(name, {})
            metrics["ci"] = {key: found[key] for key in metrics if key in found}


@dataclass
class BootstrappedResult(EvaluationResult):
    """An :class:`~selcal.report.EvaluationResult` with intervals; its JSON adds ``"bootstrap"``."""

    bootstrap: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["bootstrap"] = to_jsonable(self.bootstrap)
        return out


def add_intervals(result: EvaluationResult, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                  confidence: float = DEFAULT_CONFIDENCE,
                  refit: Sequence[RefitData | None] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> BootstrappedResult:
    """Bootstrap intervals for every model of ``result`` (the ``--bootstrap`` of ``selcal evaluate``).

    Each score's dict gets ``"ci": {metric: [low, high] | None}`` and each model's
    ``extra`` (so its JSON) a model-level ``"ci"``: accuracy, error, NLL, Brier; with groups
    (``--group-col``), each group and each of its scores too (:func:`group_intervals`). Returns
    the same models wrapped in a result whose JSON has the top-level
    ``"bootstrap": {"resamples", "seed", "confidence", "refit"}``.

    ``refit``: one :class:`RefitData` (or None: nothing fitted) per model, to refit the fitted scores
    on every resample. ``progress(done, total)``: resamples done over all models.
    """
    check_arguments(resamples, confidence)
    if refit is not None and len(refit) != len(result.models):
        raise ValueError("refit needs one RefitData per model")
    total = resamples * len(result.models)
    for index, model in enumerate(result.models):
        options = result.options  # a score left out of this model (not available on probabilities) is not refitted
        missing = model.extra.get("not_available") or {}
        if options is not None and missing.get("reason") and set(missing["scores"]) & set(options.scores):
            options = replace(options, scores=tuple(name for name in options.scores if name not in missing["scores"]))
        intervals = model_intervals(model, resamples=resamples, seed=seed, confidence=confidence,
                                    options=options, refit=None if refit is None else refit[index],
                                    progress=None if progress is None else
                                    lambda done, offset=index * resamples: progress(offset + done, total))
        model.extra["ci"] = intervals.pop("model", {})
        if getattr(model, "clusters", None) is not None:  # pixel rows: whole images were resampled
            model.extra["ci_resampled"] = "images"
        for name, metrics in intervals.items():
            model.scores[name]["ci"] = metrics
        group_intervals(model, resamples=resamples, seed=seed, confidence=confidence, options=options)
    values = {f.name: getattr(result, f.name) for f in fields(result) if f.init}
    values.pop("bootstrap", None)
    return BootstrappedResult(**values, bootstrap={
        "resamples": int(resamples), "seed": int(seed), "confidence": float(confidence),
        "refit": refit is not None and any(r is not None for r in refit),
    })
