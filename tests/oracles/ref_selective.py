"""Brute-force reference implementations of the selective-classification metrics.

These follow the words of CONVENTIONS.md ("Selective classification") as literally as
possible and share nothing with ``selcal/metrics/selective.py``: no numpy sorting, no cumulative
sums, no interpolation formula. Everything is plain Python loops over exact rationals
(``fractions.Fraction``), so a disagreement with selcal is a disagreement about the
definition, not about rounding.

Two families:

* ``*_over_orderings``: the definition of tie handling taken literally. Every ordering
  consistent with the score (samples sorted by score descending, any permutation inside a
  group of equal scores) is enumerated with ``itertools.permutations`` and the per-ordering
  value is averaged. Exponential; only for tiny N.
* ``*_by_thresholds``: a loop over the distinct thresholds t (highest first); the operating
  point of t accepts every sample with s >= t, and its errors are counted by a loop. Inside a
  tie group every position is an error with probability (errors in the group) / (group size),
  so the expected E_k is accumulated position by position. Polynomial; fine for N ~ 100.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

# --------------------------------------------------------------------------- helpers


def _check(score, correct):
    score = [float(s) for s in score]
    correct = [bool(c) for c in correct]
    assert len(score) == len(correct) and score, "need equally long, non-empty inputs"
    assert not any(math.isnan(s) for s in score)
    return score, correct


def distinct_thresholds(score):
    """Distinct score values, highest first (equality is float64 equality)."""
    values = []
    for s in score:
        if not any(s == v for v in values):
            values.append(s)
    return sorted(values, reverse=True)


def tie_groups(score):
    """Row indices grouped by equal score, groups ordered by score descending."""
    return [[i for i, s in enumerate(score) if s == t] for t in distinct_thresholds(score)]


def operating_points(score, correct):
    """[(threshold, accepted k, errors E_k)] for every distinct threshold, highest first.

    Counted by a loop over all samples for every threshold: accept s >= t.
    """
    score, correct = _check(score, correct)
    points = []
    for t in distinct_thresholds(score):
        k = 0
        errors = 0
        for s, c in zip(score, correct):
            if s >= t:
                k += 1
                if not c:
                    errors += 1
        points.append((t, k, errors))
    return points


def orderings(score):
    """Every ordering of the row indices consistent with the score.

    Sorted by score descending; inside a tie group, every permutation. Each ordering is
    equally likely under "a random order inside each tie group".
    """
    groups = tie_groups(score)
    for choice in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [i for group in choice for i in group]


def number_of_orderings(score):
    return math.prod(math.factorial(len(g)) for g in tie_groups(score))


# ------------------------------------------------------------- one fixed ordering


def cumulative_errors_of_ordering(correct_in_order):
    """E_1..E_N for samples already in acceptance order."""
    out = []
    errors = 0
    for c in correct_in_order:
        if not c:
            errors += 1
        out.append(errors)
    return out


def _mean_error_share(correct_in_order, share_of):
    """(1/N) sum_k E_k / share_of(k, N) for one fixed order, as a Fraction."""
    e = cumulative_errors_of_ordering(correct_in_order)
    n = len(e)
    total = Fraction(0)
    for k in range(1, n + 1):
        total += Fraction(e[k - 1], share_of(k, n))
    return total / n


def aurc_of_ordering(correct_in_order):
    """(1/N) sum_k E_k / k for one fixed order, as a Fraction."""
    return _mean_error_share(correct_in_order, lambda k, n: k)


def augrc_of_ordering(correct_in_order):
    """(1/N) sum_k E_k / N for one fixed order, as a Fraction."""
    return _mean_error_share(correct_in_order, lambda k, n: n)


def trapz_of_curve(risks):
    """Trapezoid rule over the points (0, 0), (1/N, r_1), ..., (1, r_N)."""
    n = len(risks)
    area = Fraction(0)
    previous_x, previous_y = Fraction(0), Fraction(0)
    for k in range(1, n + 1):
        x, y = Fraction(k, n), Fraction(risks[k - 1])
        area += (x - previous_x) * (previous_y + y) / 2
        previous_x, previous_y = x, y
    return area


def trapz_aurc_of_ordering(correct_in_order):
    e = cumulative_errors_of_ordering(correct_in_order)
    return trapz_of_curve([Fraction(e[k - 1], k) for k in range(1, len(e) + 1)])


def oracle_order(correct):
    """The oracle ordering: every correct prediction before every error."""
    return sorted((bool(c) for c in correct), reverse=True)


# --------------------------------------------------- expectation over all orderings


def _average_over_orderings(score, correct, per_ordering, max_orderings):
    score, correct = _check(score, correct)
    count = number_of_orderings(score)
    assert count <= max_orderings, f"{count} orderings: too many to enumerate"
    total = Fraction(0)
    seen = 0
    for order in orderings(score):
        total += per_ordering([correct[i] for i in order])
        seen += 1
    assert seen == count
    return total / seen


def aurc_over_orderings(score, correct, max_orderings=50_000):
    """Exact E[(1/N) sum_k E_k/k] over random orderings inside the tie groups."""
    return _average_over_orderings(score, correct, aurc_of_ordering, max_orderings)


def augrc_over_orderings(score, correct, max_orderings=50_000):
    """Exact E[(1/N) sum_k E_k/N] over random orderings inside the tie groups."""
    return _average_over_orderings(score, correct, augrc_of_ordering, max_orderings)


def trapz_aurc_over_orderings(score, correct, max_orderings=50_000):
    """Exact expectation of the trapezoid-from-(0,0) AURC over random orderings."""
    return _average_over_orderings(score, correct, trapz_aurc_of_ordering, max_orderings)


def expected_errors_over_orderings(score, correct, max_orderings=50_000):
    """[E[E_1], ..., E[E_N]] over random orderings inside the tie groups."""
    score, correct = _check(score, correct)
    n = len(score)
    count = number_of_orderings(score)
    assert count <= max_orderings
    sums = [Fraction(0)] * n
    for order in orderings(score):
        e = cumulative_errors_of_ordering([correct[i] for i in order])
        for k in range(n):
            sums[k] += e[k]
    return [s / count for s in sums]


# ------------------------------------------------------------- threshold loop


def expected_errors_by_thresholds(score, correct):
    """[E[E_1], ..., E[E_N]] from the threshold loop, position by position.

    Between the operating points of consecutive thresholds, each of the newly accepted
    positions holds an error with probability (new errors) / (new samples).
    """
    out = []
    previous_k, previous_errors = 0, 0
    expected = Fraction(0)
    for _, k, errors in operating_points(score, correct):
        p_error = Fraction(errors - previous_errors, k - previous_k)
        for _ in range(previous_k, k):
            expected += p_error
            out.append(expected)
        assert expected == errors  # the group's end is the counted value
        previous_k, previous_errors = k, errors
    return out


def aurc_by_thresholds(score, correct):
    e = expected_errors_by_thresholds(score, correct)
    n = len(e)
    return sum((e[k - 1] / k for k in range(1, n + 1)), Fraction(0)) / n


def augrc_by_thresholds(score, correct):
    e = expected_errors_by_thresholds(score, correct)
    n = len(e)
    return sum((e[k - 1] / n for k in range(1, n + 1)), Fraction(0)) / n


def trapz_aurc_by_thresholds(score, correct):
    e = expected_errors_by_thresholds(score, correct)
    return trapz_of_curve([e[k - 1] / k for k in range(1, len(e) + 1)])


def eaurc_reference(score, correct, estimator="mean"):
    """AURC minus the AURC of the explicit oracle ordering, same estimator."""
    if estimator == "mean":
        return aurc_by_thresholds(score, correct) - aurc_of_ordering(oracle_order(correct))
    if estimator == "trapz":
        return trapz_aurc_by_thresholds(score, correct) - trapz_aurc_of_ordering(oracle_order(correct))
    raise ValueError(estimator)


def coverage_at_risk_loop(score, correct, max_risk):
    """Largest k/N over the thresholds whose accepted set has E_k/k <= max_risk; 0 if none."""
    max_risk = Fraction(str(max_risk))  # the decimal the user wrote: 0.01 means 1/100
    best = Fraction(0)
    n = len(score)
    for _, k, errors in operating_points(score, correct):
        if Fraction(errors, k) <= max_risk and Fraction(k, n) > best:
            best = Fraction(k, n)
    return best


def risk_at_coverage_loop(score, correct, min_coverage):
    """E_k/k at the highest threshold whose coverage k/N is >= min_coverage (None if none)."""
    min_coverage = Fraction(str(min_coverage))
    n = len(score)
    for _, k, errors in operating_points(score, correct):  # highest threshold first
        if Fraction(k, n) >= min_coverage:
            return Fraction(errors, k)
    return None


def auroc_pairs(score, correct):
    """P(s_correct > s_error) over all (correct, error) pairs, ties counting 1/2."""
    score, correct = _check(score, correct)
    wins = Fraction(0)
    pairs = 0
    for i in range(len(score)):
        if not correct[i]:
            continue
        for j in range(len(score)):
            if correct[j]:
                continue
            pairs += 1
            if score[i] > score[j]:
                wins += 1
            elif score[i] == score[j]:
                wins += Fraction(1, 2)
    if pairs == 0:
        return None
    return wins / pairs


def fpr_at_tpr_loop(score, correct, tpr=0.95):
    """Errors accepted / all errors, at the highest threshold accepting >= tpr of the correct."""
    score, correct = _check(score, correct)
    tpr = Fraction(str(tpr))
    n_correct = sum(1 for c in correct if c)
    n_errors = len(correct) - n_correct
    if n_correct == 0 or n_errors == 0:
        return None
    for t in distinct_thresholds(score):  # from the highest down
        accepted_correct = sum(1 for s, c in zip(score, correct) if s >= t and c)
        accepted_errors = sum(1 for s, c in zip(score, correct) if s >= t and not c)
        if Fraction(accepted_correct, n_correct) >= tpr:
            return Fraction(accepted_errors, n_errors)
    raise AssertionError("the lowest threshold accepts every sample")


def selective_metrics_reference(score, correct, risks=(0.01, 0.05, 0.1), coverages=(0.5, 0.8, 0.9),
                                estimator="mean"):
    """Every metric of selective_metrics, as Fractions (or None), by the loops above."""
    if estimator == "mean":
        area = aurc_by_thresholds(score, correct)
    else:
        area = trapz_aurc_by_thresholds(score, correct)
    out = {
        "aurc": area,
        "eaurc": eaurc_reference(score, correct, estimator),
        "augrc": augrc_by_thresholds(score, correct),
        "auroc": auroc_pairs(score, correct),
        "fpr95": fpr_at_tpr_loop(score, correct, 0.95),
    }
    for r in risks:
        out[f"cov@{r:g}"] = coverage_at_risk_loop(score, correct, r)
    for c in coverages:
        out[f"risk@{c:g}"] = risk_at_coverage_loop(score, correct, c)
    return out
