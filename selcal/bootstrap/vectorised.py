"""The metrics of a block of resamples at once, from one sort of each score (see the package's
docstring): tie groups with weights, harmonic numbers, equal-width and equal-mass bins."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import digamma

from ..metrics import calibration
from ..errors import SelcalError
from ..metrics.exact_sums import CountWeightedSums
from ..metrics import catalog
from .data import RowData


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
class Binning:
    """One probability score sorted once by confidence (ascending, stable, as adaptive ECE does)."""

    order: np.ndarray
    sorted_confidence: np.ndarray
    correct_rows: np.ndarray  # rows of the correct predictions, in sorted order
    correct_before: np.ndarray  # (N + 1,) correct rows at positions < p
    bin_ends: np.ndarray  # (bins,) one past the last position of each equal-width bin
    run_start: np.ndarray  # first position of the run of equal confidence holding each position
    run_end: np.ndarray  # one past its last position
    group_ends: np.ndarray  # exclusive ends of the equal-mass groups (in resampled positions)
    in_order: bool = False  # the rows are already sorted (order is 0, 1, ..., N - 1)
    all_correct: bool = False  # every row is correct (correct_rows is order)


def binning_of(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> Binning:
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
    return Binning(
        order=order, sorted_confidence=sorted_confidence, correct_rows=order[sorted_correct],
        correct_before=np.concatenate(([0], np.cumsum(sorted_correct))),
        bin_ends=np.searchsorted(bins, np.arange(n_bins), side="right"),
        run_start=run_starts[run], run_end=run_ends[run],
        group_ends=np.cumsum(sizes[sizes > 0]),
        in_order=bool(np.array_equal(order, np.arange(n))), all_correct=bool(np.all(correct)),
    )


def _cumulative(counts: np.ndarray, columns: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(b, len(columns) + 1): column j holds the sum of ``counts[:, columns[:j]]`` (times weights);
    ``columns`` None: every column in order."""
    taken = counts if columns is None else np.take(counts, columns, axis=1)
    if weights is not None:
        taken = taken * weights
    out = np.empty((counts.shape[0], taken.shape[1] + 1), dtype=taken.dtype)
    out[:, 0] = 0
    np.cumsum(taken, axis=1, out=out[:, 1:])
    return out


class _Prefix:
    """The weight at a score's sorted positions (descending) < p in each resample, ``take(positions)``
    (b, k), ``at(rows, positions)`` (b,) and ``first_reaching(k)``: the first p where it reaches k.

    Either its own cumulative sums (``values`` (b, N + 1), ``total`` None), or, for a score ranked
    as its confidence, read from the ascending cumulative sums W of the calibration metrics: the
    weight before descending position p is total - W[N - p]. Within a tie group the two orders hold
    its rows in other orders, so the values agree at the ends of the tie groups, the only places
    read, and a search finds the same group; every value is an integer, the same either way.
    """

    def __init__(self, values: np.ndarray, total: np.ndarray | None = None):
        self.values, self.total, self.size = values, total, values.shape[1] - 1

    def take(self, positions: np.ndarray) -> np.ndarray:
        if self.total is None:
            return np.take(self.values, positions, axis=1)
        return self.total[:, None] - np.take(self.values, self.size - positions, axis=1)

    def at(self, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        if self.total is None:
            return self.values[rows, positions]
        return self.total - self.values[rows, self.size - positions]

    def first_reaching(self, k: np.ndarray) -> np.ndarray:
        """(b, m): the first p whose weight before it is >= k (``k`` <= the total), per resample."""
        if self.total is None:
            return _search_rows(self.values, k, "left")
        # total - W[N - p] >= k  <=>  W[N - p] <= total - k: the last such N - p (W non-decreasing)
        return self.size - (_search_rows(self.values, self.total[:, None] - k, "right") - 1)


def _ranked_as(score: np.ndarray, binning: Binning) -> bool:
    """``score`` orders the rows as the binning's confidence does, ties included (msp, temp and every
    calibrator rank by their probability): in the order of confidence it never decreases and two
    neighbours tie in one exactly when they tie in the other."""
    ranked = score[binning.order]
    step = np.diff(ranked)
    return bool(np.all(step >= 0) and np.array_equal(step == 0, np.diff(binning.sorted_confidence) == 0))


class Prepared:
    """Everything sorted once; :meth:`metrics` evaluates a block of resamples.

    ``keys``: the metric keys wanted (None: every one); a key left out may be missing from the
    output, and the computations only it needs (FPR@95%TPR's search, adaptive ECE, MCE, RMSCE,
    smooth ECE on every resample) are skipped. The keys computed are the same numbers either way.
    A score of ``scores`` that ``data`` holds only a confidence of gets its calibration only.
    """

    def __init__(self, data: RowData, scores: tuple[str, ...] | None = None, model_level: bool = True,
                 keys: frozenset[str] | None = None):
        if data.n == 0:
            raise SelcalError("no evaluation rows to resample")
        self.data = data
        names = tuple(data.scores) if scores is None else scores
        self.keys = None if keys is None else frozenset(keys)
        self.rankings = {s: _ranking(data.scores[s], data.correct_of.get(s, data.correct))
                         for s in names if s in data.scores}
        self.binnings = {s: binning_of(data.confidence[s], data.correct_of.get(s, data.correct), data.bins)
                         for s in names if s in data.confidence}
        # scores ranked as their own confidence: their selective metrics read the calibration's cumulative sums
        self.ranked_as_confidence = {s for s in self.rankings if s in self.binnings
                                     and _ranked_as(data.scores[s], self.binnings[s])}
        means = {k: v for k, v in data.row_means.items()  # (a mean of infinite rows, isotonic's NLL: null, no interval)
                 if ((model_level and "." not in k) or k.split(".", 1)[0] in names) and np.all(np.isfinite(v))}
        self.mean_names = list(means)
        columns = [data.correct.astype(np.float64)] + [np.asarray(v, dtype=np.float64) for v in means.values()]
        self.mean_matrix = np.stack(columns, axis=1)
        self.mean_sums = CountWeightedSums(self.mean_matrix)  # the same bits whatever BLAS's threads
        self.model_level = model_level
        self.harmonic = _harmonic(data.n)
        # the catalog computations with a form for blocks of resamples, prepared once per score (before any
        # block: the blocks may run on threads)
        self._counted = {(name, c.key): self._prepare_counted(c, binning) for name, binning in self.binnings.items()
                         for c in catalog.computations() if c.resample_counts is not None
                         and any(catalog.has_interval(k) and self._wants(k) for k in c.gives)}
        # those whose block form also takes the counts row by row (by_row=: smooth ECE), as their entry declares
        self._by_row = {key for key in self._counted if catalog.CATALOG[key[1]].resample_counts_by_row}

    def metrics(self, draws: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """Metric values of each resample (a row of ``draws``): ``{"model": {...}, score: {...}}``."""
        n = self.data.n
        counts = row_counts(draws, n)
        return self.metrics_of_counts(counts)

    def metrics_of_counts(self, counts: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """The same from multiplicities: ``counts[i, row]`` = times ``row`` is drawn in resample i.

        A resample may hold another number of rows than the data (a cluster bootstrap draws
        whole images): each resample's metrics are then those of its own rows, its own total.
        """
        n = counts.sum(axis=1)
        harmonic = self.harmonic if n.max() < self.harmonic.size else _harmonic(int(n.max()))  # (threads: no shared write)
        out: dict[str, dict[str, np.ndarray]] = {}
        sums = self.mean_sums(counts, n)
        if self.model_level:
            out["model"] = {"accuracy": sums[:, 0] / n, "error": (n - sums[:, 0]) / n}
        for j, key in enumerate(self.mean_names, start=1):
            level, _, metric = key.rpartition(".")
            out.setdefault(level or "model", {})[metric] = sums[:, j] / n
        # the counts row by row (N x b, float64) for the computations that take them so (smooth ECE)
        by_row = np.ascontiguousarray(counts.T, dtype=np.float64) if self._by_row else None
        calibrated = {}  # (each score's keys: its selective metrics, then its calibration)
        for name, ranking in self.rankings.items():
            prefix = None
            if name in self.ranked_as_confidence:  # one gather and cumulative sum for both
                binning = self.binnings[name]
                taken = counts if binning.in_order else np.take(counts, binning.order, axis=1)
                weight = _cumulative(taken, None)
                calibrated[name] = self._calibration(binning, counts, name, taken, weight, by_row)
                prefix = _Prefix(weight, n)
            out.setdefault(name, {}).update(self._selective(ranking, counts, harmonic, prefix))
        for name, binning in self.binnings.items():
            out.setdefault(name, {}).update(calibrated.pop(name) if name in calibrated
                                            else self._calibration(binning, counts, name, by_row=by_row))
        return out

    # ------------------------------------------------------------------ selective
    def _selective(self, ranking: _Ranking, counts: np.ndarray, harmonic: np.ndarray,
                   accepted: "_Prefix | None" = None) -> dict[str, np.ndarray]:
        data = self.data
        b = counts.shape[0]
        rows = np.arange(b)
        if accepted is None:  # accepted.at(rows, p) = weight at positions < p
            accepted = _Prefix(_cumulative(counts, ranking.order))
        n = accepted.values[:, -1] if accepted.total is None else accepted.total  # rows in each resample
        errors = _cumulative(counts, ranking.error_rows)  # errors[:, j] = weight of the first j errors
        n_errors = errors[:, -1].astype(np.float64)
        n_correct = n - n_errors

        # The groups holding errors: weight M, errors e, accepted a and errors E before them.
        through = accepted.take(ranking.error_group_end)
        before = accepted.take(ranking.error_group_start)
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
        out = {"aurc": area, "eaurc": area - oracle}
        if self._wants("augrc"):
            out["augrc"] = np.sum(e * (n[:, None] - through + (weight + 1) / 2.0), axis=1) / n / n
        defined = (n_errors > 0) & (n_correct > 0)
        if self._wants("auroc"):
            correct_before = before - errors_before
            wins = np.sum(e * (correct_before + 0.5 * (weight - e)), axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                out["auroc"] = np.where(defined, wins / (n_correct * n_errors), np.nan)
        if self._wants("fpr95"):  # the first group whose cumulative correct count reaches the target
            target = _first_at_least(0.95, n_correct)
            first = _bisect_groups(
                lambda g: accepted.at(rows, ranking.group_end[g] + 1) - errors[rows, ranking.errors_through[g]],
                target, ranking.group_end.size)
            with np.errstate(divide="ignore", invalid="ignore"):
                out["fpr95"] = np.where(defined, errors[rows, ranking.errors_through[first]] / n_errors, np.nan)
        if data.risks:
            with np.errstate(divide="ignore", invalid="ignore"):
                # cov@r: the last feasible point is the last point or one just before a group with errors.
                point_accepted = np.concatenate((before, n[:, None]), axis=1)
                point_errors = np.concatenate((errors_before, errors[:, -1:]), axis=1)
                risk = point_errors / point_accepted
            # Suffix minimum of the risk (NaN, nothing accepted, is never feasible): non-decreasing,
            # so the last point with risk <= r is found by a search.
            lowest_after = np.fmin.accumulate(risk[:, ::-1], axis=1)[:, ::-1]
            # every risk in one search (a column each)
            last = _search_rows(lowest_after, np.broadcast_to(np.asarray(data.risks, dtype=np.float64), (b, len(data.risks))),
                                "right") - 1
            for j, r in enumerate(data.risks):
                out[f"cov@{r:g}"] = np.where(last[:, j] >= 0, point_accepted[rows, last[:, j]] / n, 0.0)
        if data.coverages:
            k = np.stack([_first_at_least(c, n) for c in data.coverages], axis=1)
            group = ranking.group_of[accepted.first_reaching(k) - 1]
            for j, c in enumerate(data.coverages):
                out[f"risk@{c:g}"] = (errors[rows, ranking.errors_through[group[:, j]]]
                                      / accepted.at(rows, ranking.group_end[group[:, j]] + 1))
        return out

    # ---------------------------------------------------------------- calibration
    def _calibration(self, binning: Binning, counts: np.ndarray, name: str, taken: np.ndarray | None = None,
                     weight: np.ndarray | None = None, by_row: np.ndarray | None = None) -> dict[str, np.ndarray]:
        if taken is None:  # once for all below
            taken = counts if binning.in_order else np.take(counts, binning.order, axis=1)
        out = binned_metrics(binning, counts, None, self.data.bins, self.data.aece_estimator, keys=self.keys,
                             taken=taken, weight=weight)
        for computation in catalog.computations():  # one added to the catalog: its function on every resample
            wanted = [k for k in computation.gives if k not in out and catalog.has_interval(k) and self._wants(k)]
            if wanted:
                values = self._each_resample(computation, binning, counts, name, taken, by_row)
                out.update((k, values[k]) for k in wanted)
        return out

    def _wants(self, key: str) -> bool:
        return self.keys is None or key in self.keys

    def _options(self):
        from types import SimpleNamespace

        return self.data.options or SimpleNamespace(bins=self.data.bins, aece_estimator=self.data.aece_estimator)

    def _prepare_counted(self, computation: catalog.Metric, binning: Binning):
        """A computation's ``resample_counts`` on a score's rows, in the order of confidence (the result
        does not depend on the rows' order: CONVENTIONS.md, "Numbers")."""
        correct = np.zeros(binning.order.size, dtype=bool)
        correct[binning.correct_rows] = True
        return computation.resample_counts(binning.sorted_confidence, correct[binning.order], self._options())

    def _each_resample(self, computation: catalog.Metric, binning: Binning, counts: np.ndarray,
                       score: str, taken: np.ndarray, by_row: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The keys of a catalog computation of the confidence with no vectorised form here, on each
        resample: its ``resample_counts`` on the whole block (prepared once per score; ``taken``: the
        counts in the order of confidence), else its ``resample`` function once on each resample's rows."""
        if (score, computation.key) in self._counted:
            counted = self._counted[score, computation.key]
            if by_row is not None and (score, computation.key) in self._by_row:  # its rows in the order of confidence
                values = counted(taken, by_row=by_row if binning.in_order else by_row[binning.order])
            else:
                values = counted(taken)
            return dict(zip(computation.gives, values, strict=True))
        options = self._options()
        correct = np.zeros(binning.order.size, dtype=bool)
        correct[binning.correct_rows] = True
        confidence = np.empty(binning.order.size)
        confidence[binning.order] = binning.sorted_confidence
        values = {key: np.empty(counts.shape[0]) for key in computation.gives}
        for i in range(counts.shape[0]):
            # in the order of confidence, as above (smooth ECE's sort of (q, residual) is then nearly linear)
            rows = np.repeat(binning.order, counts[i, binning.order])
            for key, value in computation.values(confidence[rows], correct[rows], options, resample=True).items():
                values[key][i] = value
        return values


def binned_metrics(binning: Binning, counts: np.ndarray, hit_counts: np.ndarray | None, n_bins: int,
                   aece_estimator: str = calibration.AECE_ESTIMATORS[0], per_bin: bool = False,
                   keys: frozenset[str] | None = None, taken: np.ndarray | None = None,
                   weight: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """ECE, RMS-CE, adaptive ECE and MCE of each resample of one probability score, from its rows'
    multiplicities ``counts`` (b, n).

    ``hit_counts`` (b, n): how many of each row's copies are correct in each resample (the
    consistency resampling of :mod:`selcal.bootstrap.null` draws each copy's correctness), with a
    ``binning`` whose rows are all correct (:func:`binning_of`); None: every copy of a correct row
    is correct (the bootstrap). ``per_bin``: also each equal-width bin's count, hits and
    confidence sum (``bin_count``, ``bin_hits``, ``bin_confidence``, (b, bins)). ``keys``: the metrics
    wanted (None: all four); ECE is always computed, the others only when wanted. ``taken``: ``counts``
    already in the order of confidence (``counts[:, binning.order]``), when the caller has it; ``weight``
    its cumulative sums (``_cumulative(taken, None)``), likewise.
    """
    n = weight[:, -1] if weight is not None else counts.sum(axis=1)  # rows in each resample
    if taken is None:
        taken = counts if binning.in_order else np.take(counts, binning.order, axis=1)
    if keys is not None and not keys & {"rmsce", "aece", "mce"} and hit_counts is None and not per_bin:
        return {"ece": _ece_alone(binning, taken, n)}
    b = counts.shape[0]
    rows = np.arange(b)[:, None]
    weight = _cumulative(taken, None) if weight is None else weight
    confidence = _cumulative(taken, None, binning.sorted_confidence)
    hits_before = _hits(binning, counts, hit_counts, weight)
    # Equal-width bins: contiguous ranges of the sorted positions.
    ends = binning.bin_ends
    count = np.diff(weight[:, ends], axis=1, prepend=0).astype(np.float64)
    bin_hits = np.diff(hits_before(ends), axis=1, prepend=0).astype(np.float64)
    bin_confidence = np.diff(confidence[:, ends], axis=1, prepend=0.0)
    ece = np.sum(np.abs(bin_hits - bin_confidence), axis=1) / n
    out = {"ece": ece}
    if keys is None or "rmsce" in keys:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["rmsce"] = np.sqrt(np.sum(np.where(count > 0, (bin_hits - bin_confidence) ** 2 / count, 0.0),
                                          axis=1) / n)
    if (keys is None or "aece" in keys) and aece_estimator == "mbls":
        out["aece"] = _mbls_aece(binning, n, n_bins, weight, confidence, hits_before)
    elif keys is None or "aece" in keys:
        # Equal-mass groups: the sorted position holding each group's last resampled row.
        m = binning.group_ends[None, :] if (n == binning.order.size).all() else _equal_mass_ends(n, n_bins)
        position = _search_rows(weight, np.broadcast_to(m, (b, m.shape[1])), "left") - 1
        start, end = binning.run_start[position], binning.run_end[position]
        before = weight[rows, start]
        run_weight = weight[rows, end] - before
        hits_start = hits_before(start, rows)
        run_hits = hits_before(end, rows) - hits_start
        into = m - before  # copies of the run taken into the groups up to this boundary
        hits_at = hits_start + into * (run_hits / run_weight)
        confidence_at = confidence[rows, start] + into * binning.sorted_confidence[position]
        group_hits = np.diff(hits_at, axis=1, prepend=0.0)
        group_confidence = np.diff(confidence_at, axis=1, prepend=0.0)
        out["aece"] = np.sum(np.abs(group_hits - group_confidence), axis=1) / n
    if keys is None or "mce" in keys:
        with np.errstate(divide="ignore", invalid="ignore"):
            gaps = np.abs(bin_hits / count - bin_confidence / count)
        out["mce"] = np.max(np.where(count > 0, gaps, -np.inf), axis=1)
    if per_bin:
        out.update(bin_count=count, bin_hits=bin_hits, bin_confidence=bin_confidence)
    return out


def _hits(binning: Binning, counts: np.ndarray, hit_counts: np.ndarray | None, weight: np.ndarray):
    """``hits_before(positions, rows=all)``: the correct copies at the sorted positions before each of
    ``positions`` ((k,), or (b, k) with ``rows`` (b, 1)) in each resample, integers. Every copy of a
    correct row correct (``hit_counts`` None): the copies before it less the errors before it, from the
    cumulative sums over the rows of the smaller class (the errors, for an accurate model)."""
    if hit_counts is not None:
        hits = _cumulative(hit_counts, None if binning.in_order and binning.all_correct else binning.correct_rows)
        return lambda positions, rows=slice(None): hits[rows, binning.correct_before[positions]]
    n_rows = binning.order.size
    if 2 * binning.correct_rows.size <= n_rows:
        hits = _cumulative(counts, binning.correct_rows)
        return lambda positions, rows=slice(None): hits[rows, binning.correct_before[positions]]
    correct = np.zeros(n_rows, dtype=bool)
    correct[binning.correct_rows] = True
    sorted_error = ~correct[binning.order]
    errors = _cumulative(counts, binning.order[sorted_error])
    errors_before = np.arange(n_rows + 1) - binning.correct_before  # error rows at positions < p
    return lambda positions, rows=slice(None): weight[rows, positions] - errors[rows, errors_before[positions]]


def _ece_alone(binning: Binning, taken: np.ndarray, n: np.ndarray) -> np.ndarray:
    """ECE of each resample when no other binned metric is wanted: each equal-width bin's sum of
    count x (correct - confidence) over its rows (contiguous in the sorted order), in one pass,
    instead of three cumulative sums (the same value up to rounding). ``taken``: the counts in the
    order of confidence."""
    gap = np.diff(binning.correct_before).astype(np.float64) - binning.sorted_confidence
    starts = np.concatenate(([0], binning.bin_ends[:-1]))
    filled = starts[binning.bin_ends > starts]  # (a bin without rows has no sum; reduceat would repeat a row)
    per_bin = np.add.reduceat(taken * gap, filled, axis=1)
    return np.sum(np.abs(per_bin), axis=1) / n


def _mbls_aece(binning: Binning, n: np.ndarray, n_bins: int, weight, confidence, hits_before) -> np.ndarray:
    """Adaptive ECE of ``--aece-estimator mbls`` on each resample (as
    :func:`selcal.metrics.calibration.mbls_adaptive_calibration_error` on the repeated rows).

    The edges interpolate the resample's sorted confidences at positions j n / B: the
    resampled row at position r is the original sorted position whose cumulative weight
    passes r. Bins are (edge_b, edge_b+1], contiguous ranges of the original order.
    """
    b = n.size
    rows = np.arange(b)[:, None]
    sorted_confidence = binning.sorted_confidence
    t = np.arange(n_bins + 1)[None, :] * (n[:, None] / n_bins)  # np.linspace(0, n, B + 1)
    t[:, -1] = n
    at = np.minimum(np.floor(t), n[:, None] - 1).astype(np.int64)
    after = np.minimum(at + 1, n[:, None] - 1)
    position = _search_rows(weight, at, "right") - 1
    next_position = _search_rows(weight, after, "right") - 1
    low, high = sorted_confidence[position], sorted_confidence[next_position]
    edges = np.where(t >= n[:, None] - 1, sorted_confidence[position], (high - low) * (t - at) + low)
    ends = np.searchsorted(sorted_confidence, edges, side="right")  # positions with confidence <= edge
    bin_hits = np.diff(hits_before(ends, rows), axis=1)
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


def _search_rows(rows: np.ndarray, targets: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted(rows[i], targets[i], side)`` for every row i at once: one binary search per
    target, all run together (about log2(row length) vectorised steps, not a Python loop over rows).

    ``rows`` (b, m), each non-decreasing (NaN, compared as numpy sorts it, only at a row's end);
    ``targets`` (b,) or (b, k); returns int64 of the shape of ``targets``.

    >>> _search_rows(np.array([[0, 1, 1, 3], [2, 2, 2, 2]]), np.array([[1, 3], [2, 5]]), "left")
    array([[1, 3],
           [0, 4]])
    """
    flat = np.ndim(targets) == 1
    t = np.asarray(targets)[:, None] if flat else np.asarray(targets)
    m = rows.shape[1]
    at = np.arange(rows.shape[0])[:, None]
    low = np.zeros(t.shape, dtype=np.int64)
    high = np.full(t.shape, m, dtype=np.int64)
    for _ in range(max(1, m).bit_length()):  # the interval [low, high) halves each step
        middle = (low + high) // 2
        value = rows[at, np.minimum(middle, m - 1)]
        right = (value < t) if side == "left" else (value <= t)
        active = low < high
        low = np.where(active & right, middle + 1, low)
        high = np.where(active & ~right, middle, high)
    return low[:, 0] if flat else low


def row_counts(draws: np.ndarray, n: int) -> np.ndarray:
    """Multiplicity of every row in each resample: (b, n) int64 from (b, n) row indices."""
    b = draws.shape[0]
    flat = (draws + (np.arange(b, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n)
