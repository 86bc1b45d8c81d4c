"""Certified thresholds per group (``selcal threshold --group-col G`` or ``--per-class``; CONVENTIONS.md,
"Deployment thresholds with a guarantee", "Thresholds per group").

The rule of :mod:`selcal.threshold.guarantee` runs in each group g on the group's own calibration
rows, at δ_g = δ / G (Bonferroni over the G groups that have calibration rows), so that every
group's guarantee holds together with probability at least 1 - δ:

    P(some group g has risk_g > its bound) <= Σ_g P(risk_g > bound_g) <= Σ_g δ / G = δ.

With ``per_group`` each group runs at δ instead, and the guarantee holds for each group alone. A
group with fewer calibration rows than any calibration set needs for a guarantee at δ_g
(:func:`selcal.threshold.guarantee.minimum_rows`) abstains on everything; a group that has
evaluation rows but no calibration row is *uncovered*: nothing was certified for it, and the
combined rule rejects its rows.

Pure functions of arrays: scores, correctness and group values in; certificates out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import said
from .guarantee import (DELTA_FLOOR, Applied, Certificate, apply_threshold, certify, check_delta, check_level,
                        minimum_rows, split_level)
from ..metrics.selective import risk_coverage

__all__ = ["CERTIFIED", "ABSTAIN", "TOO_FEW_ROWS", "UNCOVERED", "GroupCertificate", "certify_groups",
           "group_delta", "combined", "group_names"]

CERTIFIED, ABSTAIN, TOO_FEW_ROWS, UNCOVERED = "certified", "abstain", "too-few-rows", "uncovered"


@dataclass(frozen=True)
class GroupCertificate:
    """One group's answer.

    Attributes
    ----------
    name : str
        The group's value, as text.
    value : object
        The group's value as found in the rows (for selecting them).
    status : str
        ``certified`` (a threshold), ``abstain`` (no threshold qualifies), ``too-few-rows`` (fewer
        calibration rows than ``minimum_rows``: no threshold could qualify, whatever the data) or
        ``uncovered`` (no calibration row at all).
    certificate : Certificate or None
        The group's certificate (None when uncovered).
    evaluation : Applied
        The group's threshold on the group's evaluation rows (nothing accepted when it has none).
    delta : float or None
        δ_g, the level the group was tested at (None when uncovered).
    minimum_rows : int or None
        For ``too-few-rows``: the calibration rows a guarantee at δ_g needs at least.
    """

    name: str
    value: object
    status: str
    certificate: Certificate | None
    evaluation: Applied
    delta: float | None
    minimum_rows: int | None = None

    @property
    def threshold(self) -> float | None:
        return None if self.certificate is None else self.certificate.threshold

    @property
    def abstain_all(self) -> bool:
        return self.threshold is None

    @property
    def n_calibration(self) -> int:
        return 0 if self.certificate is None else self.certificate.n


def group_names(values: np.ndarray) -> list[str]:
    """The text of each group value: an integer as its digits, anything else as ``str``.

    Examples
    --------
    >>> group_names(np.array([3, 10])), group_names(np.array(["a", "b"]))
    (['3', '10'], ['a', 'b'])
    """
    return [str(value) for value in np.asarray(values).tolist()]


def group_delta(delta: float, covered: int, per_group: bool = False) -> float:
    """δ_g: δ / G (rounded down, so that the G levels never sum above δ), or δ with ``per_group``.

    Examples
    --------
    >>> group_delta(0.1, 4), group_delta(0.1, 4, per_group=True)
    (0.025, 0.1)
    """
    delta = check_delta(delta)
    if per_group or covered <= 1:
        return delta
    level = split_level(delta, covered)
    if level < DELTA_FLOOR:
        raise ValueError(f"delta {delta:.3g} split over {covered} groups is {level:.3g}, below {DELTA_FLOOR:g}: give a "
                         f"larger {said('delta')}, fewer groups, or {said('delta_per_group', True)}")
    return level


def certify_groups(cal_values, cal_correct, cal_groups, ev_values, ev_correct, ev_groups, *, risk: float,
                   delta: float, method: str, per_group: bool = False) -> tuple[GroupCertificate, ...]:
    """One :class:`GroupCertificate` per group present in the calibration or the evaluation rows,
    in the order of ``np.unique`` over their values (numbers by value, text alphabetically).

    Parameters
    ----------
    cal_values, cal_correct, cal_groups : arrays of the calibration rows (score as ranked, whether
        the prediction is right, group value).
    ev_values, ev_correct, ev_groups : the same of the evaluation rows.
    risk, delta, method : as :func:`selcal.threshold.guarantee.certify`; ``delta`` is split over the
        groups with calibration rows unless ``per_group``.

    Examples
    --------
    >>> score = np.arange(200.0) % 100
    >>> groups = np.repeat(["a", "b"], 100)
    >>> out = certify_groups(score, np.ones(200, bool), groups, score, np.ones(200, bool), groups,
    ...                      risk=0.2, delta=0.1, method="sgr")
    >>> [(g.name, g.status, g.delta, g.certificate.accepted) for g in out]
    [('a', 'certified', 0.05, 99), ('b', 'certified', 0.05, 99)]
    """
    risk, delta = check_level(risk, "risk"), check_delta(delta)
    cal_values, ev_values = np.asarray(cal_values, dtype=np.float64), np.asarray(ev_values, dtype=np.float64)
    cal_correct, ev_correct = np.asarray(cal_correct, dtype=bool), np.asarray(ev_correct, dtype=bool)
    cal_groups, ev_groups = np.asarray(cal_groups), np.asarray(ev_groups)
    covered = np.unique(cal_groups)
    values = np.unique(np.concatenate([covered, np.unique(ev_groups)]))
    level = group_delta(delta, covered.size, per_group)
    fewest = minimum_rows(risk, level, method) if covered.size else 0
    is_covered = set(covered.tolist())
    out = []
    for value, name in zip(values.tolist(), group_names(values)):
        ev = ev_groups == value
        if value not in is_covered:
            out.append(GroupCertificate(name, value, UNCOVERED, None, Applied(int(ev.sum()), 0, 0), None))
            continue
        cal = cal_groups == value
        curve = risk_coverage(cal_values[cal], cal_correct[cal])
        if curve.n < fewest:
            cert = Certificate(method, risk, level, None, curve.n, 0, 0, None, (), curve)
            out.append(GroupCertificate(name, value, TOO_FEW_ROWS, cert, Applied(int(ev.sum()), 0, 0), level, fewest))
            continue
        cert = certify(curve, risk=risk, delta=level, method=method)
        applied = apply_threshold(ev_values[ev], ev_correct[ev], cert.threshold)
        out.append(GroupCertificate(name, value, ABSTAIN if cert.abstain_all else CERTIFIED, cert, applied, level))
    return tuple(out)


def combined(groups: tuple[GroupCertificate, ...]) -> Applied:
    """The rule "accept a row when its group's threshold accepts it" on every evaluation row
    (a row of an uncovered or abstaining group is rejected).

    Examples
    --------
    >>> cal = np.arange(100.0)
    >>> out = certify_groups(cal, cal > 5, np.zeros(100), [50.0, 1.0, 7.0], [True, True, False], [0, 0, 1],
    ...                      risk=0.3, delta=0.1, method="sgr")
    >>> [g.status for g in out], combined(out)
    (['certified', 'uncovered'], Applied(n=3, accepted=2, errors=0))
    """
    return Applied(sum(g.evaluation.n for g in groups), sum(g.evaluation.accepted for g in groups),
                   sum(g.evaluation.errors for g in groups))
