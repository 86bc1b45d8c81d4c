"""The paired bootstrap of ``selcal compare``: B - A on the same resampled rows."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import SelcalError
from ..results import ModelResult
from .data import RowData
from .intervals import canonical_order, draw_cluster_counts
from .resample import (DEFAULT_CONFIDENCE, MODEL_LEVEL, Values, check_arguments, draw_resamples, in_order,
                       percentile_interval, threads)
from .vectorised import Prepared
from ..options import DEFAULT_RESAMPLES, DEFAULT_SEED


# --------------------------------------------------------------------------- paired
def paired_differences(model_a: ModelResult, model_b: ModelResult, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                       confidence: float = DEFAULT_CONFIDENCE, options=None,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, dict[str, dict]]:
    """B - A for every metric both models have, with a paired percentile interval.

    The two models must hold the same evaluation rows in the same order; every resample
    draws the same rows for both, so the noise the two share (which rows are easy) cancels.
    Pixel rows (``model_a.clusters``, the image of each row) are resampled by whole images.
    Returns ``{level: {metric: {"a", "b", "difference", "ci", "undefined"}}}`` with
    level ``"model"`` or a score name; ``ci`` is None when the interval is undefined.
    """
    from ..options import Options

    check_arguments(resamples, confidence)
    options = options or Options()
    data_a = RowData.from_model(model_a, options)
    data_b = RowData.from_model(model_b, options)
    if data_a.n != data_b.n:
        raise SelcalError(f"the two models have {data_a.n} and {data_b.n} evaluation rows; compare needs the same rows")
    order = canonical_order(data_a, data_b)
    prepared_a, prepared_b = Prepared(data_a.take(order)), Prepared(data_b.take(order))
    collected = Values(resamples)
    if data_a.clusters is not None:  # pixel rows: both models resample the same whole images
        blocks = draw_cluster_counts(data_a.clusters[order], resamples, seed, max(data_a.bins, data_b.bins))
        measure = lambda p, counts: p.metrics_of_counts(counts)  # noqa: E731
    else:
        blocks = draw_resamples(data_a.n, resamples, seed, max(data_a.bins, data_b.bins))
        measure = lambda p, draws: p.metrics(draws)  # noqa: E731
    for draws, (a, b) in in_order(lambda d: (measure(prepared_a, d), measure(prepared_b, d)), blocks, threads(options)):
        collected.add({level: {m: b[level][m] - a[level][m] for m in a[level] if m in b.get(level, {})}
                       for level in a if level in b})
        if progress is not None:
            progress(collected.filled, resamples)
    differences = collected.values
    points_a, points_b = _points(model_a), _points(model_b)
    out: dict[str, dict[str, dict]] = {}
    for level, metrics in differences.items():
        for metric, values in metrics.items():
            a, b = points_a.get(level, {}).get(metric), points_b.get(level, {}).get(metric)
            out.setdefault(level, {})[metric] = {
                "a": a, "b": b,
                "difference": None if a is None or b is None else b - a,
                "ci": percentile_interval(values, confidence),
                "undefined": int(np.count_nonzero(~np.isfinite(values))),
                "resampled": values,  # B - A on each resample (NaN: undefined), for the gate's p-value
            }
    return out


def _points(model: ModelResult) -> dict[str, dict[str, float | None]]:
    def number(value):
        return float(value) if isinstance(value, (int, float, np.floating)) and math.isfinite(value) else None

    out = {"model": {m: number(getattr(model, m)) for m in MODEL_LEVEL}}
    for name, metrics in model.scores.items():
        out[name] = {k: number(v) for k, v in metrics.items() if not isinstance(v, (bool, dict, str, type(None)))}
    return out
