"""Bootstrap confidence intervals for every metric, vectorised over resamples. Pure: no I/O.

A bootstrap resample draws N of the N evaluation rows with replacement (an exact
multinomial: N uniform integer draws). The metrics of CONVENTIONS.md are then computed on
the resampled rows exactly as :mod:`selcal.selective` and :mod:`selcal.calibration` would
compute them on ``rows[draws]``, but for a whole block of resamples at once and without
sorting again:

* each score is sorted **once**; a resample keeps the original tie groups, each with a
  weight (how many times its rows were drawn) and an error weight. Groups drawn zero times
  vanish, which is exactly what happens to them in the resampled data.
* AURC: in a resample, tie group g has weight m (rows drawn from it), e errors, and a rows
  holding E errors before it; it adds sum_{j=1..m} (E + j e/m) / (a + j)
  = E (H(a+m) - H(a)) + (e/m) (m - a (H(a+m) - H(a))) to N * AURC (H the harmonic numbers,
  from a table). Summed by parts, only the groups holding an error remain:
  N * AURC = sum_g e [H(N) - H(a+m) + 1 - a (H(a+m) - H(a)) / m]. AUGRC and AUROC sum over
  the same groups; FPR@95%TPR and risk@c are found by searches in the cumulative weights,
  and the last feasible point of cov@r is the last point or one just before a group
  holding an error.
* ECE and MCE from weighted sums over the equal-width bins; adaptive ECE *exactly*, not
  approximated: the equal-mass boundaries of a resample fall at fixed positions (it has N
  rows too) of the original confidence order with every row repeated by its weight, so each
  boundary is found by a search in the cumulative weights of the original runs of equal
  confidence, and a run cut by a boundary shares its hits in proportion, as in
  :func:`selcal.calibration.adaptive_calibration_error`.
* accuracy, error, NLL and Brier are means of per-row values.

Class-wise ECE has no interval: it needs every class's probability of every row, which
the result object does not keep (only per-row reductions are kept). Neither do per-group
metrics (``--group-col``).

Resample indices are drawn over the rows in an order fixed by their content
(:func:`canonical_order`), so, like every other number of selcal, the intervals do not
depend on the order of the rows in the file.

A value undefined in a resample (AUROC or FPR@95%TPR with no error or no correct
prediction) is left out of that metric's percentiles; if more than half the tail mass,
(1 - confidence) / 2, of the resamples is undefined, the interval is ``None``.

Without refitting (the default), the temperature and p of the fitted scores stay those
fitted on the full validation split: the intervals describe the noise of the evaluation
rows only. :class:`RefitData` adds the noise of the fit: every resample also redraws the
validation rows and refits every fitted score (slow: one full evaluation per resample).

References
----------
Efron & Tibshirani, "An introduction to the bootstrap", 1993, ch. 13 (percentile interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
from scipy.special import digamma

from . import calibration
from .errors import OptionError, SelcalError
from .exact_sums import CountWeightedSums
from .metrics import catalog
from .results import EvaluationResult, ModelResult, to_jsonable
from .scores import REGISTRY, fitted as fitted_scores

__all__ = [
    "DEFAULT_CONFIDENCE",
    "RowData",
    "RefitData",
    "draw_resamples",
    "canonical_order",
    "resample_metrics",
    "refit_metrics",
    "percentile_interval",
    "model_intervals",
    "row_intervals",
    "add_intervals",
    "paired_differences",
    "BootstrappedResult",
]

DEFAULT_CONFIDENCE = 0.95
_BLOCK_ELEMENTS = 1 << 18  # resamples x rows (or bins) per block: a few arrays of 8 MB each
# The most resamples --bootstrap takes. Each resample keeps one float64 per metric (about 60
# with the four default scores: 480 bytes), filled in place block by block, so the memory of
# the values is 8 x metrics x B: about 0.5 GB at this ceiling, whatever N.
MAX_RESAMPLES = 1_000_000
MODEL_LEVEL = tuple(k for k in catalog.model_level() if catalog.has_interval(k))  # accuracy, error, NLL, Brier


# ----------------------------------------------------------------------------- inputs
@dataclass
class RowData:
    """The per-row arrays the bootstrap resamples (evaluation rows, one entry per row).

    Parameters
    ----------
    correct : bool (N,)
    scores : score name -> confidence values (N,), higher = more confident.
    confidence : score name -> top-label probability (N,), for the scores that have
        calibration metrics (those with probabilities in the registry).
    row_means : metric -> per-row values whose mean is the metric, either at model level
        (``"nll"``) or for a score (``"temp.nll"``).
    correct_of : score name -> its own correctness (N,), for a score whose probabilities
        have their own argmax (its errors are its own).
    risks, coverages, estimator, bins, aece_estimator : as in :class:`selcal.options.Options`.
    """

    correct: np.ndarray
    scores: dict[str, np.ndarray]
    confidence: dict[str, np.ndarray] = field(default_factory=dict)
    row_means: dict[str, np.ndarray] = field(default_factory=dict)
    risks: tuple[float, ...] = (0.01, 0.05, 0.1)
    coverages: tuple[float, ...] = (0.5, 0.8, 0.9)
    estimator: str = "mean"
    bins: int = calibration.DEFAULT_BINS
    clusters: np.ndarray | None = None  # per row: its cluster (image); resamples then draw whole clusters
    correct_of: dict[str, np.ndarray] = field(default_factory=dict)
    aece_estimator: str = "equal-mass"
    options: Any = None  # the Options of the evaluation (the functions of catalog metrics read them)

    @property
    def n(self) -> int:
        return int(self.correct.size)

    @classmethod
    def from_model(cls, model: ModelResult, options=None) -> "RowData":
        """The arrays of a :class:`~selcal.report.ModelResult` (from ``selcal.evaluate``)."""
        from .options import Options

        options = options or Options()
        rows = model.rows
        if rows is None or not model.score_values:
            raise SelcalError(f"{model.name}: the result holds no per-row values to resample; evaluate it again")
        # (a probability column of the file, --score-col, keeps no confidence: its ECE gets no interval)
        confidence = {name: model.confidences[name] for name in model.scores if name in model.confidences}
        correct_of = {name: np.asarray(model.score_correct[name], dtype=bool)
                      for name in model.scores if name in model.score_correct}
        # none without logits; none either for rows of no class (--ood-label: NaN, no NLL or Brier)
        row_means = {k: v for k, v in (("nll", rows.nll), ("brier", rows.brier)) if v is not None and _known(v)}
        for name in model.scores:
            score_rows = (rows.scores or {}).get(name)
            if name in correct_of:
                row_means[f"{name}.accuracy"] = correct_of[name]
            for key in ("nll", "brier"):
                if score_rows is not None and getattr(score_rows, key) is not None and _known(getattr(score_rows, key)):
                    row_means[f"{name}.{key}"] = getattr(score_rows, key)
        return cls(
            correct=np.asarray(rows.correct, dtype=bool),
            scores={name: np.asarray(model.score_values[name], dtype=np.float64)
                    for name in model.scores if name in model.score_values},
            confidence=confidence, row_means=row_means, correct_of=correct_of,
            risks=tuple(options.risks), coverages=tuple(options.coverages),
            estimator=options.aurc_estimator, bins=options.bins, aece_estimator=options.aece_estimator,
            options=options,
            clusters=None if getattr(model, "clusters", None) is None else np.asarray(model.clusters),
        )

    def take(self, rows: np.ndarray) -> "RowData":
        """The same data restricted to (or reordered by) the index array ``rows``."""
        return replace(
            self, correct=self.correct[rows], scores={k: v[rows] for k, v in self.scores.items()},
            confidence={k: v[rows] for k, v in self.confidence.items()},
            row_means={k: v[rows] for k, v in self.row_means.items()},
            correct_of={k: v[rows] for k, v in self.correct_of.items()},
            clusters=None if self.clusters is None else self.clusters[rows],
        )


def _known(values: np.ndarray) -> bool:
    """Every row has a value (rows of no class, --ood-label, have no NLL or Brier: no interval)."""
    return not np.isnan(np.asarray(values, dtype=np.float64)).any()


@dataclass
class RefitData:
    """Logits and labels of one model's evaluation and validation rows, for refitting the fitted scores.

    The evaluation rows must be those of the result, in the same order.
    """

    logits: np.ndarray
    labels: np.ndarray
    val_logits: np.ndarray
    val_labels: np.ndarray
    clusters: np.ndarray | None = None  # pixel rows: the image of each evaluation row ...
    val_clusters: np.ndarray | None = None  # ... and of each validation row (whole images are redrawn)


# ---------------------------------------------------------------------- preparation
def _harmonic(n: int) -> np.ndarray:
    """H(0..n), H(k) = sum_{i<=k} 1/i, each to full float64 precision (digamma, not a running sum)."""
    k = np.arange(n + 1, dtype=np.float64)
    out = digamma(k + 1.0) + np.euler_gamma
    out[0] = 0.0
    return out


def _first_at_least(target: float, denominator):
    """Smallest integer k with k / denominator >= target, in float64 as the plain metrics compare."""
    denominator = np.asarray(denominator, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.ceil(target * denominator)
        for _ in range(2):
            k = np.where((k - 1) / denominator >= target, k - 1, k)
            k = np.where(k / denominator < target, k + 1, k)
    return k


@dataclass
class _Ranking:
    """One score sorted once (descending, stable: the order of ``selective.risk_coverage``).

    Positions are indices into the sorted order. Only the tie groups holding an error
    enter AURC, AUGRC and AUROC (summation by parts), so most work is done on those.
    """

    order: np.ndarray  # row at each sorted position
    group_of: np.ndarray  # tie group of each sorted position
    group_start: np.ndarray  # first position of each group
    group_end: np.ndarray  # last position of each group
    error_rows: np.ndarray  # rows of the errors, in sorted order
    errors_through: np.ndarray  # errors in groups <= g, per group g
    error_groups: np.ndarray  # groups holding at least one error
    first_error: np.ndarray  # per error group: index (into error_rows) of its first error
    last_error: np.ndarray  # ... and one past its last
    error_group_start: np.ndarray  # per error group: its first position
    error_group_end: np.ndarray  # ... and one past its last


def _ranking(score: np.ndarray, correct: np.ndarray) -> _Ranking:
    order = np.argsort(-score, kind="stable")
    starts = np.empty(score.size, dtype=bool)
    starts[0] = True
    starts[1:] = np.diff(score[order]) != 0
    group_of = np.cumsum(starts) - 1
    n_groups = int(group_of[-1]) + 1
    group_end = np.append(np.flatnonzero(starts)[1:] - 1, score.size - 1)
    is_error = ~correct[order]
    errors_through = np.cumsum(np.bincount(group_of[is_error], minlength=n_groups))
    error_groups = np.flatnonzero(np.diff(errors_through, prepend=0) > 0)
    last_error = errors_through[error_groups]
    first_error = np.concatenate(([0], last_error))[:-1]
    group_start = np.flatnonzero(starts)
    return _Ranking(order=order, group_of=group_of, group_start=group_start, group_end=group_end,
                    error_rows=order[is_error], errors_through=errors_through, error_groups=error_groups,
                    first_error=first_error, last_error=last_error,
                    error_group_start=group_start[error_groups], error_group_end=group_end[error_groups] + 1)


@dataclass
class _Binning:
    """One probability score sorted once by confidence (ascending, stable, as adaptive ECE does)."""

    order: np.ndarray
    sorted_confidence: np.ndarray
    correct_rows: np.ndarray  # rows of the correct predictions, in sorted order
    correct_before: np.ndarray  # (N + 1,) correct rows at positions < p
    bin_ends: np.ndarray  # (bins,) one past the last position of each equal-width bin
    run_start: np.ndarray  # first position of the run of equal confidence holding each position
    run_end: np.ndarray  # one past its last position
    group_ends: np.ndarray  # exclusive ends of the equal-mass groups (in resampled positions)


def _binning(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> _Binning:
    n = confidence.size
    order = np.argsort(confidence, kind="stable")
    sorted_confidence = confidence[order]
    sorted_correct = correct[order]
    bins = calibration.equal_width_bin(sorted_confidence, n_bins)  # non-decreasing
    starts = np.empty(n, dtype=bool)
    starts[0] = True
    starts[1:] = np.diff(sorted_confidence) != 0
    run = np.cumsum(starts) - 1
    run_starts = np.flatnonzero(starts)
    run_ends = np.append(run_starts[1:], n)
    base, extra = divmod(n, n_bins)
    sizes = np.full(n_bins, base, dtype=np.int64)
    sizes[:extra] += 1
    return _Binning(
        order=order, sorted_confidence=sorted_confidence, correct_rows=order[sorted_correct],
        correct_before=np.concatenate(([0], np.cumsum(sorted_correct))),
        bin_ends=np.searchsorted(bins, np.arange(n_bins), side="right"),
        run_start=run_starts[run], run_end=run_ends[run],
        group_ends=np.cumsum(sizes[sizes > 0]),
    )


def _cumulative(counts: np.ndarray, columns: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(b, len(columns) + 1): column j holds the sum of ``counts[:, columns[:j]]`` (times weights)."""
    taken = np.take(counts, columns, axis=1)
    if weights is not None:
        taken = taken * weights
    out = np.empty((counts.shape[0], columns.size + 1), dtype=taken.dtype)
    out[:, 0] = 0
    np.cumsum(taken, axis=1, out=out[:, 1:])
    return out


class _Prepared:
    """Everything sorted once; :meth:`metrics` evaluates a block of resamples."""

    def __init__(self, data: RowData, scores: tuple[str, ...] | None = None, model_level: bool = True):
        if data.n == 0:
            raise SelcalError("no evaluation rows to resample")
        self.data = data
        names = tuple(data.scores) if scores is None else scores
        self.rankings = {s: _ranking(data.scores[s], data.correct_of.get(s, data.correct)) for s in names}
        self.binnings = {s: _binning(data.confidence[s], data.correct_of.get(s, data.correct), data.bins)
                         for s in names if s in data.confidence}
        means = {k: v for k, v in data.row_means.items()
                 if (model_level and "." not in k) or k.split(".", 1)[0] in names}
        self.mean_names = list(means)
        columns = [data.correct.astype(np.float64)] + [np.asarray(v, dtype=np.float64) for v in means.values()]
        self.mean_matrix = np.stack(columns, axis=1)
        self.mean_sums = CountWeightedSums(self.mean_matrix)  # the same bits whatever BLAS's threads
        self.model_level = model_level
        self.harmonic = _harmonic(data.n)

    def metrics(self, draws: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """Metric values of each resample (a row of ``draws``): ``{"model": {...}, score: {...}}``."""
        n = self.data.n
        counts = _row_counts(draws, n)
        return self.metrics_of_counts(counts)

    def metrics_of_counts(self, counts: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """The same from multiplicities: ``counts[i, row]`` = times ``row`` is drawn in resample i.

        A resample may hold another number of rows than the data (a cluster bootstrap draws
        whole images): each resample's metrics are then those of its own rows, its own total.
        """
        n = counts.sum(axis=1)
        if n.max() >= self.harmonic.size:
            self.harmonic = _harmonic(int(n.max()))
        out: dict[str, dict[str, np.ndarray]] = {}
        sums = self.mean_sums(counts, n)
        if self.model_level:
            out["model"] = {"accuracy": sums[:, 0] / n, "error": (n - sums[:, 0]) / n}
        for j, key in enumerate(self.mean_names, start=1):
            level, _, metric = key.rpartition(".")
            out.setdefault(level or "model", {})[metric] = sums[:, j] / n
        for name, ranking in self.rankings.items():
            out.setdefault(name, {}).update(self._selective(ranking, counts))
        for name, binning in self.binnings.items():
            out.setdefault(name, {}).update(self._calibration(binning, counts))
        return out

    # ------------------------------------------------------------------ selective
    def _selective(self, ranking: _Ranking, counts: np.ndarray) -> dict[str, np.ndarray]:
        data, harmonic = self.data, self.harmonic
        n = counts.sum(axis=1)  # rows in each resample
        b = counts.shape[0]
        rows = np.arange(b)
        accepted = _cumulative(counts, ranking.order)  # accepted[:, p] = weight at positions < p
        errors = _cumulative(counts, ranking.error_rows)  # errors[:, j] = weight of the first j errors
        n_errors = errors[:, -1].astype(np.float64)
        n_correct = n - n_errors

        # The groups holding errors: weight M, errors e, accepted a and errors E before them.
        through = np.take(accepted, ranking.error_group_end, axis=1)
        before = np.take(accepted, ranking.error_group_start, axis=1)
        errors_before = np.take(errors, ranking.first_error, axis=1)
        e = np.take(errors, ranking.last_error, axis=1) - errors_before
        weight = through - before
        h_through = np.take(harmonic, through)
        delta_h = h_through - np.take(harmonic, before)
        share = np.divide(before * delta_h, weight, out=np.zeros_like(delta_h), where=weight > 0)
        # N * AURC = sum_k E_k / k, summed by parts over the groups holding errors.
        area = np.sum(e * ((harmonic[n] + 1.0)[:, None] - h_through - share), axis=1) / n
        oracle = (n_errors - n_correct * (harmonic[n] - harmonic[n_correct.astype(np.int64)])) / n
        if data.estimator == "trapz":
            area = area - n_errors / n / (2 * n)
            oracle = oracle - n_errors / n / (2 * n)
        out = {
            "aurc": area,
            "eaurc": area - oracle,
            "augrc": np.sum(e * (n[:, None] - through + (weight + 1) / 2.0), axis=1) / n / n,
        }
        defined = (n_errors > 0) & (n_correct > 0)
        correct_before = before - errors_before
        wins = np.sum(e * (correct_before + 0.5 * (weight - e)), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["auroc"] = np.where(defined, wins / (n_correct * n_errors), np.nan)
            # FPR@95%TPR: the first group whose cumulative correct count reaches the target.
            target = _first_at_least(0.95, n_correct)
            first = _bisect_groups(
                lambda g: accepted[rows, ranking.group_end[g] + 1] - errors[rows, ranking.errors_through[g]],
                target, ranking.group_end.size)
            out["fpr95"] = np.where(defined, errors[rows, ranking.errors_through[first]] / n_errors, np.nan)
            # cov@r: the last feasible point is the last point or one just before a group with errors.
            point_accepted = np.concatenate((before, n[:, None]), axis=1)
            point_errors = np.concatenate((errors_before, errors[:, -1:]), axis=1)
            risk = point_errors / point_accepted
        # Suffix minimum of the risk (NaN, nothing accepted, is never feasible): non-decreasing,
        # so the last point with risk <= r is found by a search.
        lowest_after = np.fmin.accumulate(risk[:, ::-1], axis=1)[:, ::-1]
        for r in data.risks:
            last = np.array([np.searchsorted(lowest_after[i], r, side="right") - 1 for i in range(b)])
            out[f"cov@{r:g}"] = np.where(last >= 0, point_accepted[rows, last] / n, 0.0)
        for c in data.coverages:
            k = _first_at_least(c, n)
            position = np.array([np.searchsorted(accepted[i], k[i], side="left") - 1 for i in range(b)])
            group = ranking.group_of[position]
            out[f"risk@{c:g}"] = errors[rows, ranking.errors_through[group]] / accepted[rows, ranking.group_end[group] + 1]
        return out

    # ---------------------------------------------------------------- calibration
    def _calibration(self, binning: _Binning, counts: np.ndarray) -> dict[str, np.ndarray]:
        n = counts.sum(axis=1)  # rows in each resample
        b = counts.shape[0]
        rows = np.arange(b)[:, None]
        weight = _cumulative(counts, binning.order)
        confidence = _cumulative(counts, binning.order, binning.sorted_confidence)
        hits = _cumulative(counts, binning.correct_rows)
        # Equal-width bins: contiguous ranges of the sorted positions.
        ends = binning.bin_ends
        count = np.diff(weight[:, ends], axis=1, prepend=0).astype(np.float64)
        bin_hits = np.diff(hits[:, binning.correct_before[ends]], axis=1, prepend=0).astype(np.float64)
        bin_confidence = np.diff(confidence[:, ends], axis=1, prepend=0.0)
        ece = np.sum(np.abs(bin_hits - bin_confidence), axis=1) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            gaps = np.abs(bin_hits / count - bin_confidence / count)
        mce = np.max(np.where(count > 0, gaps, -np.inf), axis=1)
        # Equal-mass groups: the sorted position holding each group's last resampled row.
        m = binning.group_ends[None, :] if (n == self.data.n).all() else _equal_mass_ends(n, self.data.bins)
        position = np.stack([np.searchsorted(weight[i], m[min(i, m.shape[0] - 1)], side="left") - 1
                             for i in range(b)])
        start, end = binning.run_start[position], binning.run_end[position]
        before = weight[rows, start]
        run_weight = weight[rows, end] - before
        hits_start = hits[rows, binning.correct_before[start]]
        run_hits = hits[rows, binning.correct_before[end]] - hits_start
        taken = m - before
        hits_at = hits_start + taken * (run_hits / run_weight)
        confidence_at = confidence[rows, start] + taken * binning.sorted_confidence[position]
        group_hits = np.diff(hits_at, axis=1, prepend=0.0)
        group_confidence = np.diff(confidence_at, axis=1, prepend=0.0)
        aece = np.sum(np.abs(group_hits - group_confidence), axis=1) / n
        if self.data.aece_estimator == "mbls":
            aece = self._mbls_aece(binning, n, weight, confidence, hits)
        out = {"ece": ece, "aece": aece, "mce": mce}
        for metric in catalog.confidence_metrics():  # a metric added to the catalog: its function on every resample
            if metric.key not in out and metric.interval:
                out[metric.key] = self._each_resample(metric, binning, counts)
        return out

    def _each_resample(self, metric, binning: _Binning, counts: np.ndarray) -> np.ndarray:
        """A catalog metric of the confidence with no vectorised form, computed on each resample's rows."""
        from types import SimpleNamespace

        options = self.data.options or SimpleNamespace(bins=self.data.bins, aece_estimator=self.data.aece_estimator)
        correct = np.zeros(binning.order.size, dtype=bool)
        correct[binning.correct_rows] = True
        values = np.empty(counts.shape[0])
        for i in range(counts.shape[0]):
            rows = np.repeat(np.arange(counts.shape[1]), counts[i])
            confidence = np.empty(binning.order.size)
            confidence[binning.order] = binning.sorted_confidence
            values[i] = metric.compute(confidence[rows], correct[rows], options)
        return values

    def _mbls_aece(self, binning: _Binning, n: np.ndarray, weight, confidence, hits) -> np.ndarray:
        """Adaptive ECE of ``--aece-estimator mbls`` on each resample (as
        :func:`selcal.calibration.mbls_adaptive_calibration_error` on the repeated rows).

        The edges interpolate the resample's sorted confidences at positions j n / B: the
        resampled row at position r is the original sorted position whose cumulative weight
        passes r. Bins are (edge_b, edge_b+1], contiguous ranges of the original order.
        """
        b, n_bins = n.size, self.data.bins
        rows = np.arange(b)[:, None]
        sorted_confidence = binning.sorted_confidence
        t = np.arange(n_bins + 1)[None, :] * (n[:, None] / n_bins)  # np.linspace(0, n, B + 1)
        t[:, -1] = n
        at = np.minimum(np.floor(t), n[:, None] - 1).astype(np.int64)
        after = np.minimum(at + 1, n[:, None] - 1)
        position = np.stack([np.searchsorted(weight[i], at[i], side="right") - 1 for i in range(b)])
        next_position = np.stack([np.searchsorted(weight[i], after[i], side="right") - 1 for i in range(b)])
        low, high = sorted_confidence[position], sorted_confidence[next_position]
        edges = np.where(t >= n[:, None] - 1, sorted_confidence[position], (high - low) * (t - at) + low)
        ends = np.searchsorted(sorted_confidence, edges, side="right")  # positions with confidence <= edge
        bin_hits = np.diff(hits[rows, binning.correct_before[ends]], axis=1)
        bin_confidence = np.diff(confidence[rows, ends], axis=1)
        return np.sum(np.abs(bin_hits - bin_confidence), axis=1) / n


def _equal_mass_ends(n: np.ndarray, n_bins: int) -> np.ndarray:
    """(b, bins): exclusive ends of the equal-mass groups of resamples of ``n[i]`` rows (the
    first n mod bins groups one row larger; empty groups, when n < bins, add nothing)."""
    base, extra = np.divmod(n, n_bins)
    sizes = base[:, None] + (np.arange(n_bins)[None, :] < extra[:, None])
    return np.cumsum(sizes, axis=1)


def _bisect_groups(value_of, target: np.ndarray, n_groups: int) -> np.ndarray:
    """Per resample, the first group g with value_of(g) >= target (value_of non-decreasing in g).

    ``value_of`` maps an int array (b,) of groups to values (b,); the last group always qualifies.
    """
    low = np.zeros(target.shape, dtype=np.int64)
    high = np.full(target.shape, n_groups - 1, dtype=np.int64)
    while np.any(low < high):
        middle = (low + high) // 2
        reached = value_of(middle) >= target
        high = np.where(reached, middle, high)
        low = np.where(reached, low, middle + 1)
    return low


def _row_counts(draws: np.ndarray, n: int) -> np.ndarray:
    """Multiplicity of every row in each resample: (b, n) int64 from (b, n) row indices."""
    b = draws.shape[0]
    flat = (draws + (np.arange(b, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n)


# ------------------------------------------------------------------------ resampling
def _block_size(n: int) -> int:
    return max(1, _BLOCK_ELEMENTS // max(n, 1))


def draw_resamples(n: int, resamples: int, seed: int, bins: int = 0):
    """Yield blocks of resamples, arrays of row indices of shape (block, n), from one seed.

    The same (n, resamples, seed) always yields the same indices, whatever else is computed
    (``bins``, when more than n, makes the blocks smaller: per-block arrays of resamples x
    bins stay bounded).
    """
    rng = np.random.default_rng(seed)
    block = _block_size(max(n, bins))
    for start in range(0, resamples, block):
        yield rng.integers(0, n, size=(min(block, resamples - start), n), dtype=np.int64)


def resample_metrics(data: RowData, draws: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Every metric of every score on each resample ``data.take(draws[i])``, vectorised.

    Parameters
    ----------
    data : RowData
    draws : int array (b, N) of row indices, one resample per row.

    Returns
    -------
    ``{"model": {"accuracy", "error", "nll", "brier": (b,)}, score: {metric: (b,)}}``; NaN
    where a value is undefined (AUROC, FPR@95%TPR without errors or without correct rows).

    Examples
    --------
    >>> data = RowData(correct=np.array([True, True, False, False]),
    ...                scores={"s": np.array([0.9, 0.8, 0.8, 0.1])})
    >>> float(resample_metrics(data, np.array([[0, 1, 2, 3]]))["s"]["auroc"][0])
    0.875
    """
    draws = np.atleast_2d(np.asarray(draws, dtype=np.int64))
    return _Prepared(data).metrics(draws)


class _Values:
    """Every metric's value on each of ``resamples`` resamples, filled in place block by block.

    One float64 array of length B per metric, nothing else kept: 8 bytes per metric and
    resample (a metric missing from a block stays NaN, undefined).
    """

    def __init__(self, resamples: int):
        self.resamples, self.filled = resamples, 0
        self.values: dict[str, dict[str, np.ndarray]] = {}

    def add(self, block: dict[str, dict[str, np.ndarray]]) -> None:
        size = 0
        for level, metrics in block.items():
            for metric, values in metrics.items():
                into = self.values.setdefault(level, {}).get(metric)
                if into is None:
                    into = self.values[level][metric] = np.full(self.resamples, np.nan)
                into[self.filled:self.filled + values.size] = values
                size = values.size
        self.filled += size


def _stack(blocks: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {}
    for level in blocks[0]:
        out[level] = {m: np.concatenate([blk[level][m] for blk in blocks]) for m in blocks[0][level]}
    return out


def percentile_interval(values: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> list[float] | None:
    """The percentile interval [q(a/2), q(1 - a/2)], a = 1 - confidence, of the defined values.

    NaN (undefined) values are left out; ``None`` when more than a/2 of them are undefined.

    Examples
    --------
    >>> percentile_interval(np.arange(5.0), 0.5)
    [1.0, 3.0]
    >>> percentile_interval(np.array([1.0, np.nan, np.nan, 2.0]), 0.9) is None
    True
    """
    values = np.asarray(values, dtype=np.float64)
    defined = values[np.isfinite(values)]
    tail = (1.0 - confidence) / 2
    if defined.size == 0 or values.size - defined.size > tail * values.size:
        return None
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    return [float(low), float(high)]


def check_arguments(resamples: int, confidence: float) -> None:
    """Refuse a bad number of resamples or level (errors name the Python arguments; the CLI its flags)."""
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer, float)) \
            or not float(resamples).is_integer() or resamples < 2:
        raise OptionError("bootstrap", "{option} takes the number of resamples, at least 2 (e.g. 1000); got "
                          + repr(resamples))
    if resamples > MAX_RESAMPLES:
        raise OptionError("bootstrap", f"{{option}} takes at most {MAX_RESAMPLES:,} resamples (each keeps a float64 "
                                       f"per metric: about 0.5 GB at the ceiling); got {resamples:,}")
    if not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise OptionError("confidence", "{option} must be between 0 and 1 (e.g. 0.95); got " + repr(confidence))


# --------------------------------------------------------------------------- refit
def refit_metrics(refit: RefitData, options, eval_draws: np.ndarray, val_draws: np.ndarray,
                  scores: tuple[str, ...] | None = None,
                  progress: Callable[[int], None] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Metrics of the fitted scores when they are refitted on every resample.

    ``scores``: the fitted scores to refit (default: every fitted score of ``options``).
    Resample i is literally :func:`selcal.evaluate.measure_arrays` fitted on the validation rows
    ``val_draws[i]`` and measured on the evaluation rows ``eval_draws[i]`` (one full
    evaluation per resample: slow, but the same code as the point estimate). Also returns
    each resample's temperature. ``progress(i)`` is called after the i-th resample.
    """
    from .pipeline.measure import measure_arrays

    wanted = tuple(s for s in fitted_scores(options.scores if scores is None else scores) if s in options.scores)
    fit_options = replace(options, scores=wanted)
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
    return _stack(blocks)


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
    prepared = _Prepared(data.take(order), tuple(s for s in data.scores if s not in fitted))
    val_rng = np.random.default_rng([seed, 1])
    val_order = validation_order(refit) if fitted else None
    values = _Values(resamples)
    done = 0
    for draws in draw_resamples(data.n, resamples, seed, data.bins):
        block = prepared.metrics(draws)
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
    from .pipeline.split import row_hashes

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
    block = _block_size(max(cluster_of_row.size, bins))
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters), dtype=np.int64)
        cluster_counts = _row_counts(draws, n_clusters)
        yield cluster_counts[:, cluster_of_row]


def _cluster_metrics(data: RowData, resamples: int, seed: int, refit, options=None) -> dict[str, dict[str, np.ndarray]]:
    """:func:`_all_metrics` for clustered rows (pixels of images): whole images are resampled."""
    fitted = fitted_scores(data.scores) if refit is not None else ()
    if fitted and (refit.clusters is None or refit.val_clusters is None):
        raise SelcalError("--bootstrap-refit on pixel rows needs the images of the validation pixels")
    order = canonical_order(data)
    ordered = data.take(order)
    prepared = _Prepared(ordered, tuple(s for s in data.scores if s not in fitted))
    values = _Values(resamples)  # one float64 per metric and resample, as in _all_metrics
    if fitted:  # validation images, redrawn whole with their own generator (as the rows are in _all_metrics)
        val_images, val_image_of_row = np.unique(refit.val_clusters, return_inverse=True)
        val_rows_of = np.split(np.argsort(val_image_of_row, kind="stable"),
                               np.cumsum(np.bincount(val_image_of_row))[:-1])
        val_rng = np.random.default_rng([seed, 1])
    rows = np.arange(data.n)
    for counts in draw_cluster_counts(ordered.clusters, resamples, seed, data.bins):
        block = prepared.metrics_of_counts(counts)
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


def model_intervals(model: ModelResult, *, resamples: int = 1000, seed: int = 0,
                    confidence: float = DEFAULT_CONFIDENCE, options=None,
                    refit: RefitData | None = None,
                    progress: Callable[[int], None] | None = None) -> dict[str, dict[str, list[float] | None]]:
    """Percentile intervals of every metric of one model: ``{"model": {...}, score: {...}}``.

    ``refit``: the model's logits, to refit the fitted scores on every resample (see the module notes).
    """
    from .options import Options

    options = options or Options()
    return row_intervals(RowData.from_model(model, options), resamples=resamples, seed=seed,
                         confidence=confidence, refit=refit, options=options, progress=progress)


def row_intervals(data: RowData, *, resamples: int = 1000, seed: int = 0, confidence: float = DEFAULT_CONFIDENCE,
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


@dataclass
class BootstrappedResult(EvaluationResult):
    """An :class:`~selcal.report.EvaluationResult` with intervals; its JSON adds ``"bootstrap"``."""

    bootstrap: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["bootstrap"] = to_jsonable(self.bootstrap)
        return out


def add_intervals(result: EvaluationResult, *, resamples: int = 1000, seed: int = 0,
                  confidence: float = DEFAULT_CONFIDENCE,
                  refit: Sequence[RefitData | None] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> BootstrappedResult:
    """Bootstrap intervals for every model of ``result`` (the ``--bootstrap`` of ``selcal evaluate``).

    Each score's dict gets ``"ci": {metric: [low, high] | None}`` and each model's
    ``extra`` (so its JSON) a model-level ``"ci"``: accuracy, error, NLL, Brier. Returns
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
    values = {f.name: getattr(result, f.name) for f in fields(result) if f.init}
    values.pop("bootstrap", None)
    return BootstrappedResult(**values, bootstrap={
        "resamples": int(resamples), "seed": int(seed), "confidence": float(confidence),
        "refit": refit is not None and any(r is not None for r in refit),
    })


# --------------------------------------------------------------------------- paired
def paired_differences(model_a: ModelResult, model_b: ModelResult, *, resamples: int = 1000, seed: int = 0,
                       confidence: float = DEFAULT_CONFIDENCE, options=None,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, dict[str, dict]]:
    """B - A for every metric both models have, with a paired percentile interval.

    The two models must hold the same evaluation rows in the same order; every resample
    draws the same rows for both, so the noise the two share (which rows are easy) cancels.
    Pixel rows (``model_a.clusters``, the image of each row) are resampled by whole images.
    Returns ``{level: {metric: {"a", "b", "difference", "ci", "undefined"}}}`` with
    level ``"model"`` or a score name; ``ci`` is None when the interval is undefined.
    """
    from .options import Options

    check_arguments(resamples, confidence)
    options = options or Options()
    data_a = RowData.from_model(model_a, options)
    data_b = RowData.from_model(model_b, options)
    if data_a.n != data_b.n:
        raise SelcalError(f"the two models have {data_a.n} and {data_b.n} evaluation rows; compare needs the same rows")
    order = canonical_order(data_a, data_b)
    prepared_a, prepared_b = _Prepared(data_a.take(order)), _Prepared(data_b.take(order))
    collected = _Values(resamples)
    if data_a.clusters is not None:  # pixel rows: both models resample the same whole images
        blocks = draw_cluster_counts(data_a.clusters[order], resamples, seed, max(data_a.bins, data_b.bins))
        measure = lambda p, counts: p.metrics_of_counts(counts)  # noqa: E731
    else:
        blocks = draw_resamples(data_a.n, resamples, seed, max(data_a.bins, data_b.bins))
        measure = lambda p, draws: p.metrics(draws)  # noqa: E731
    for draws in blocks:
        a, b = measure(prepared_a, draws), measure(prepared_b, draws)
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
