"""Calibration under the null (``--calibration-test M``): what a perfectly calibrated model of the same
size and confidence distribution would score (CONVENTIONS.md, "Calibration under the null").

Consistency resampling (Bröcker & Smith 2007; Vaicenavicius et al. 2019): each of M draws takes N
top-label confidences q* with replacement from the evaluation rows and a correctness c* ~ Bernoulli(q*)
for each, and computes the metric of (q*, c*). Reported per metric of the catalog that has null
summaries (:func:`selcal.metrics.catalog.tested_under_the_null`: ECE, adaptive ECE, smooth ECE): the
floor (the mean of the M values), their 95th percentile and p = (1 + #{null value >= observed}) / (1 + M).

Vectorised like the bootstrap (:mod:`selcal.bootstrap.vectorised`): a draw is the multiplicity of each
row and the number of its copies that are correct, so the binned metrics come from cumulative sums of
one sort of the confidences (:func:`~selcal.bootstrap.vectorised.binned_metrics`), and smooth ECE from
one spread of every draw's residuals onto a grid and a batched fixed-point search
(:func:`selcal.metrics.smooth.smooth_ece_many`, within 1e-3 of the exact value of each draw).

Seeded: the draws come from ``numpy.random.default_rng(seed)``, in blocks of rows (:func:`null_draws`),
as positions into the confidences sorted ascending, so the numbers do not depend on the order of the rows;
every score of a model takes the same positions and uniforms, each its own confidences.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..metrics import calibration, smooth
from ..metrics import catalog
from ..options import DEFAULT_SEED
from .vectorised import binned_metrics, binning_of

__all__ = ["CalibrationNull", "null_draws", "calibration_nulls", "add_calibration_test", "BAND_LEVEL"]

BAND_LEVEL = 0.95  # the reliability diagram's band: the central 95% of a calibrated model's gap in each bin
_BLOCK_ELEMENTS = 1 << 18  # draws x rows per block: a few arrays of 2 MB (in cache: faster than larger blocks)
_BAND_ELEMENTS = 1 << 22  # draws x bins kept for the band (32 MB); beyond, no band
_PILOT = 8  # draws whose smooth ECE is searched from scratch: their σ* sets the grid and the others' start


@dataclass
class CalibrationNull:
    """The null distribution of one score's tested metrics.

    ``values``: metric -> the M null values (M,), in the order of the draws; ``band``: per equal-width
    bin, the 2.5% and 97.5% points of the null's accuracy minus confidence (NaN where a bin was empty in
    more than 5% of the draws; None when not kept), for the reliability diagram.
    """

    draws: int
    seed: int
    values: dict[str, np.ndarray]
    band: tuple[np.ndarray, np.ndarray] | None = None

    def summary(self, observed: Mapping[str, float | None]) -> dict[str, float | None]:
        """``{ece_floor, ece_null_q95, ece_p, ...}`` of the observed values (a score's metrics).

        Examples
        --------
        >>> null = CalibrationNull(4, 0, {"ece": np.array([0.01, 0.02, 0.03, 0.04])})
        >>> null.summary({"ece": 0.035})
        {'ece_floor': 0.025, 'ece_null_q95': 0.0385, 'ece_p': 0.4}
        """
        out: dict[str, float | None] = {}
        for metric, values in self.values.items():
            value = observed.get(metric)
            out[f"{metric}_floor"] = float(np.mean(values))
            out[f"{metric}_null_q95"] = float(np.quantile(values, 0.95))
            out[f"{metric}_p"] = None if value is None else float((1 + np.count_nonzero(values >= value))
                                                                  / (1 + values.size))
        return out


def null_draws(n: int, draws: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Blocks of draws: (positions (b, n) int64 in [0, n), uniforms (b, n) in [0, 1)), one block after the
    other from ``numpy.random.default_rng(seed)`` (positions, then uniforms, of each block).

    Draw i takes the confidences at ``positions[i]`` of the evaluation rows sorted ascending; a copy is
    correct when its uniform is below its confidence.
    """
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // max(n, 1))
    for start in range(0, draws, block):
        size = min(block, draws - start)
        positions = rng.integers(0, n, size=(size, n), dtype=np.int64)
        yield positions, rng.random((size, n))


def calibration_nulls(confidences: Mapping[str, np.ndarray], *, draws: int, seed: int = DEFAULT_SEED,
                      bins: int = calibration.DEFAULT_BINS, aece_estimator: str = calibration.AECE_ESTIMATORS[0],
                      band: bool = True) -> dict[str, CalibrationNull]:
    """The null distribution of every tested metric of each score: ``{score: CalibrationNull}``.

    Parameters
    ----------
    confidences : score -> top-label confidence of each evaluation row (N,), in [0, 1]; every score the
        same N rows.
    draws, seed : M and the seed of :func:`null_draws`.
    bins, aece_estimator : as the observed metrics were computed (:class:`selcal.options.Options`).
    band : keep each bin's null gaps for the reliability diagram (only when M x bins <= 2^22).

    Examples
    --------
    >>> q = np.linspace(0.5, 1.0, 200)
    >>> null = calibration_nulls({"s": q}, draws=50, seed=1)["s"]
    >>> sorted(null.values), null.values["ece"].shape
    (['aece', 'ece', 'smece'], (50,))
    """
    tested = catalog.tested_under_the_null()
    sorted_q = {name: np.sort(np.asarray(q, dtype=np.float64)) for name, q in confidences.items()}
    if not sorted_q:
        return {}
    n = next(iter(sorted_q.values())).size
    if n == 0 or any(q.size != n for q in sorted_q.values()):
        raise ValueError("calibration_nulls needs the same rows, at least one, for every score")
    keep_band = band and draws * bins <= _BAND_ELEMENTS
    binnings = {name: binning_of(q, np.ones(n, dtype=bool), bins) for name, q in sorted_q.items()}
    values = {name: {m: np.empty(draws) for m in tested} for name in sorted_q}
    gaps = {name: np.empty((draws, bins)) for name in sorted_q} if keep_band else {}
    grids: dict[str, tuple] = {}  # per score: the binning grid, the search's start, the spreading matrix
    done = 0
    for positions, uniforms in null_draws(n, draws, seed):
        b = positions.shape[0]
        flat = (positions + (np.arange(b, dtype=np.int64) * n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)  # (float: BLAS products)
        totals = counts.sum(axis=1)
        for name, q in sorted_q.items():
            correct = (uniforms < q[positions]).ravel()
            hit_counts = np.bincount(flat[correct], minlength=b * n).reshape(b, n).astype(np.float64)
            binned = binned_metrics(binnings[name], counts, hit_counts, bins, aece_estimator, per_bin=keep_band)
            block = slice(done, done + b)
            for metric in ("ece", "aece"):
                if metric in values[name]:
                    values[name][metric][block] = binned[metric]
            if keep_band:
                with np.errstate(divide="ignore", invalid="ignore"):
                    gaps[name][block] = np.where(binned["bin_count"] > 0,
                                                 (binned["bin_hits"] - binned["bin_confidence"]) / binned["bin_count"],
                                                 np.nan)
            if "smece" in values[name]:
                if name not in grids:  # a few draws searched from scratch: the grid for their σ*, and a start
                    n_grid, guess = _pilot(q, counts[:_PILOT], hit_counts[:_PILOT])
                    grids[name] = n_grid, guess, smooth.spreading(q, n_grid)
                n_grid, guess, spread = grids[name]
                residuals = hit_counts - counts * q
                positive = hit_counts @ (1.0 - q)  # the copies' residuals c - q: 1 - q when correct ...
                negative = -((counts - hit_counts) @ q)  # ... -q when wrong
                values[name]["smece"][block] = smooth.smooth_ece_many(
                    q, residuals, totals, positive=positive, negative=negative, n_grid=n_grid, guess=guess,
                    spread=spread)[0]
        done += b
    out = {}
    for name in sorted_q:
        bands = None
        if keep_band:
            empty_often = np.mean(np.isnan(gaps[name]), axis=0) > 1 - BAND_LEVEL
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a bin empty in every draw: NaN
                low, high = np.nanquantile(gaps[name], [(1 - BAND_LEVEL) / 2, (1 + BAND_LEVEL) / 2], axis=0)
            bands = (np.where(empty_often, np.nan, low), np.where(empty_often, np.nan, high))
        out[name] = CalibrationNull(draws=int(draws), seed=int(seed), values=values[name], band=bands)
    return out


def _pilot(q: np.ndarray, counts: np.ndarray, hit_counts: np.ndarray) -> tuple[int, float | None]:
    """The binning grid and the starting σ of the smooth ECE search: from the σ* of a few draws searched
    from scratch (the bootstrap's resample grid), the grid fine enough for the smallest (6 points per σ)."""
    residuals = hit_counts - counts * q
    _, sigmas = smooth.smooth_ece_many(q, residuals, counts.sum(axis=1).astype(np.float64),
                                       positive=hit_counts @ (1.0 - q), negative=-((counts - hit_counts) @ q))
    found = sigmas[sigmas > 0]
    if not found.size:
        return smooth.MANY_GRID, None
    return max(smooth.MANY_GRID, smooth.many_grid(float(found.min()) / 1.5)), float(np.median(found))


def add_calibration_test(model, draws: int, seed: int = DEFAULT_SEED, options=None) -> None:
    """Add the calibration test of every score of ``model`` (a :class:`~selcal.results.ModelResult`) that
    has a top-label confidence, as ``evaluate --calibration-test M`` does: in each score's metrics,
    ``ece_floor``, ``ece_null_q95``, ``ece_p`` and the same for ``aece`` and ``smece``, each beside its
    metric; the null distributions in ``model.calibration_nulls`` (the reliability diagram's band).

    ``options``: the :class:`~selcal.options.Options` the model was evaluated with (its bins and adaptive
    ECE estimator; default: the defaults). The library entry point for studies: call it on each model.
    """
    from ..options import Options, check_calibration_test

    options = options or Options()
    draws = check_calibration_test(draws, "draws")
    if not draws:
        return
    confidences = {}
    for name, metrics in model.scores.items():
        if name in model.confidences:
            confidences[name] = model.confidences[name]
        elif "ece" in metrics and name in model.score_values:  # a column of probabilities (--score-col)
            confidences[name] = model.score_values[name]
    nulls = calibration_nulls({k: np.asarray(v, dtype=np.float64) for k, v in confidences.items()}, draws=draws,
                              seed=seed, bins=options.bins, aece_estimator=options.aece_estimator)
    for name, null in nulls.items():
        model.scores[name] = _beside(model.scores[name], null.summary(model.scores[name]))
        model.calibration_nulls[name] = null


def _beside(metrics: dict, added: dict) -> dict:
    """``metrics`` with the added keys right after the metric they summarise, in the catalog's order
    (``ece``, ``ece_floor``, ``ece_null_q95``, ``ece_p``; after ``smece_sigma`` for ``smece``, whose
    computation gives both)."""
    after: dict[str, list[str]] = {}
    for key, metric in catalog.CATALOG.items():
        if metric.null is not None and key in added:
            after.setdefault(catalog.CATALOG[metric.null[0]].gives[-1], []).append(key)
    out = {}
    for key, value in metrics.items():
        if key in added:
            continue
        out[key] = value
        for extra in after.get(key, ()):
            out[extra] = added[extra]
    for key, value in added.items():
        out.setdefault(key, value)
    return out
