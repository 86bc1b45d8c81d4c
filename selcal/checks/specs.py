"""Metric specs of the options (``msp.aurc``, ``aurc_msp``, ``aurc``, ``MODEL:msp.aurc``) and bounds
(``METRIC=VALUE``, the value in the unit the tables show, ``6%``, or as a fraction, ``0.06``).

:func:`parse_bounds` is the one parser of bounds and tolerances: ``check``, ``compare`` and ``study``
read theirs with it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Iterable, Sequence

from ..errors import SelcalError, flag, said
from ..metrics import catalog
from ..metrics.catalog import better
from ..options import fraction
from .load import HIGHER_IS_BETTER, LOWER_IS_BETTER, Metric


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class Spec:
    """Which metrics an option names: ``[MODEL:][GROUP/][SCORE.]METRIC``, or ``*`` for every metric.

    A spec with a group names only that group's metrics (``--group-col``); one without, only the model's.
    """

    text: str
    model: str | None
    score: str | None
    metric: str | None  # None: every metric
    group: str | None = None

    def matches(self, metric: Metric) -> bool:
        return ((self.model is None or self.model == metric.model)
                and (self.metric is None or self.metric == metric.metric)
                and (self.score is None or self.score == metric.score)
                and self.group == metric.group)

    @property
    def specificity(self) -> tuple[int, int, int]:
        return (self.score is not None, self.model is not None, self.metric is not None)


def parse_spec(text: str, option: str) -> Spec:
    """``msp.aurc``, ``aurc`` (every score's), ``accuracy``, ``resnet:msp.aurc``, ``*``.

    Examples
    --------
    Every metric has one set of names: ``msp.aurc`` (the JSON's) and ``aurc_msp`` (the leaderboard
    CSV's column) are the same metric, and a family's value may be given in percent (``cov@5%``).

    >>> parse_spec("msp.cov@0.05", "--max")
    Spec(text='msp.cov@0.05', model=None, score='msp', metric='cov@0.05', group=None)
    >>> parse_spec("aurc_max_logit", "--metric")
    Spec(text='aurc_max_logit', model=None, score='max_logit', metric='aurc', group=None)

    A group's metric (``--group-col``): ``GROUP/`` before it, or ``GROUP.`` before a score's.

    >>> [(s.group, s.score, s.metric) for s in (parse_spec("shifted/msp.aurc", "--max"),
    ...                                         parse_spec("shifted.msp.aurc", "--max"))]
    [('shifted', 'msp', 'aurc'), ('shifted', 'msp', 'aurc')]
    >>> parse_spec("shifted/accuracy", "--min").group
    'shifted'
    """
    model, _, name = text.strip().rpartition(":")
    name = name.strip()
    model = model.strip() or None
    group, slash, rest = name.rpartition("/")
    if slash:  # a group's metric: shifted/msp.aurc, shifted/accuracy
        name, group = rest.strip(), group.strip()
    if name == "*":
        return Spec(text, model, None, None, group or None)
    # a registered score, or any other name before a metric with a direction: a score column (--score-col)
    score, metric = catalog.split_name(name)
    if (not metric or better(metric) is None) and not slash and name.count(".") >= 2:
        head, _, tail = name.partition(".")  # shifted.msp.aurc: the group before a score's metric
        if better(catalog.split_name(tail)[1] or "") is not None and catalog.split_name(tail)[0] is not None:
            return replace(parse_spec(f"{head}/{tail}", option), text=text, model=model)
    if not metric or better(metric) is None:
        known = ", ".join(LOWER_IS_BETTER + HIGHER_IS_BETTER + ("cov@R", "risk@C"))
        raise SelcalError(f"{option} {text}: '{metric or name}' is not a metric with a direction; "
                          f"use [SCORE.]METRIC with METRIC one of {known}")
    return Spec(text, model, score, metric, group or None)


def parse_specs(texts: Iterable[str], option: str) -> list[Spec]:
    return [parse_spec(t, option) for t in texts or ()]


def parse_bounds(texts: Iterable[str], option: str) -> list[tuple[Spec, float]]:
    """``["msp.aurc=6%", "aurc_temp=0.05", ...]`` -> [(Spec, 0.06), (Spec, 0.05), ...]: the bounds
    (``--max``, ``--min``) or tolerances (``--tolerance``) of an option, each value a fraction. ``option``
    names it in the messages as its caller does: the flag, or the argument of :func:`~selcal.checks.check` (``maxima``,
    ``minima``, ``tolerances``), each held to the same rule.

    A value is given in the unit the tables show (``6%`` of a metric shown in percent) or as the
    fraction the JSON holds (``0.06``); a bare number that cannot be a fraction (beyond 1 in size)
    of a metric shown in percent is refused with the two ways to write it, and so is a percent of a
    metric that is a plain number (NLL, Brier). Bad syntax raises :class:`SelcalError` too.

    Examples
    --------
    >>> [(spec.text, value) for spec, value in parse_bounds(["msp.aurc=6%", "aurc_temp=0.05", "nll=0.4"], "--max")]
    [('msp.aurc', 0.06), ('aurc_temp', 0.05), ('nll', 0.4)]
    >>> parse_bounds(["msp.aurc=6"], "--max")
    Traceback (most recent call last):
    ...
    selcal.errors.SelcalError: --max msp.aurc=6: AURC is a fraction, shown in percent: 6 would be 600%; write msp.aurc=6% or msp.aurc=0.06
    """
    return [parse_bound(text, option) for text in texts or ()]


def parse_bound(text: str, option: str) -> tuple[Spec, float]:
    """One ``METRIC=VALUE`` of :func:`parse_bounds`."""
    name, equals, value = text.partition("=")
    value = value.strip()
    percent = value.endswith("%")
    try:
        number = float(value[:-1] if percent else value)
    except ValueError:
        number = math.nan
    if not equals or not name.strip() or not math.isfinite(number):
        raise SelcalError(f"{option} takes METRIC=VALUE, e.g. {option} msp.aurc=6% (or 0.06); got {text!r}")
    spec = parse_spec(name, option)
    in_percent = spec.metric is None or catalog.unit(spec.metric) == "pct"  # (* covers the percent metrics too)
    shown = "every metric" if spec.metric is None else catalog.name(spec.metric)
    if percent and not in_percent:
        raise SelcalError(f"{option} {text}: {shown} is a plain number, not shown in percent; "
                          f"write {name.strip()}={number:g}")
    if not percent and in_percent and abs(number) > 1:
        what = (f"{shown} is a fraction, shown in percent" if spec.metric is not None
                else "* covers the metrics shown in percent")
        raise SelcalError(f"{option} {text}: {what}: {number:g} would be {100 * number:g}%; "
                          f"write {name.strip()}={number:g}% or {name.strip()}={number / 100:g}")
    # the percent as written, divided exactly and rounded once (options.fraction): 85.4% is 0.854, as the JSON
    # holds it (85.4 / 100 in floating point is 0.8540000000000001, which fails --min accuracy=85.4% at 0.854)
    number = fraction(value) if percent else number
    if _flag_of(option) == "--tolerance" and number < 0:
        raise SelcalError(f"{option} {text}: a tolerance must be >= 0")
    _within_range(text, option, spec, number, in_percent)
    return spec, number


def _flag_of(option: str) -> str:
    """What ``option`` is, as its flag: the command line's ``--max`` as given, a Python caller's ``maxima``
    (``tolerances``, ``minima``) as its flag (:data:`selcal.errors.FLAGS`), so both are held to one rule."""
    return option if option.startswith("-") else flag(option)


def _within_range(text: str, option: str, spec: Spec, number: float, in_percent: bool) -> None:
    """A bound outside the values the metric takes (``msp.aurc=150%``, ``-1%``, ``nll=-1``) never
    fails or never passes: refused, saying the range. ``*`` covers every metric, each at least 0."""
    low, high = catalog.values_range(spec.metric) if spec.metric is not None else (0.0, math.inf)

    def shown(value: float) -> str:
        return f"{Decimal(repr(value)) * 100:f}".rstrip("0").rstrip(".") + "%" if in_percent else f"{value:g}"

    what = "every metric" if spec.metric is None else catalog.name(spec.metric)
    span = (f"between {shown(low)} and {shown(high)}" if math.isfinite(high) else f"at least {shown(low)}")
    if _flag_of(option) == "--tolerance":
        if number > high - low:
            raise SelcalError(f"{option} {text}: {what} is {span}, so two values never differ by more than "
                              f"{shown(high - low)}: a tolerance of {shown(number)} never fails; write a value "
                              f"between {shown(0.0)} and {shown(high - low)}")
        return
    if low <= number <= high:
        return
    never = "fails" if (number > high) == (_flag_of(option) == "--max") else "passes"
    raise SelcalError(f"{option} {text}: {what} is {span}: a bound of {shown(number)} never {never}; "
                      f"write a value {span if math.isfinite(high) else 'of ' + span}")


def most_specific(bounds: Sequence[tuple[Spec, float]], metric: Metric) -> float | None:
    matching = [(spec.specificity, index, value) for index, (spec, value) in enumerate(bounds) if spec.matches(metric)]
    return max(matching)[2] if matching else None


def require_matches(specs: Iterable[Spec], metrics: Sequence[Metric], option: str, path: str) -> None:
    for spec in specs:
        if not any(spec.matches(m) for m in metrics):
            entry = catalog.get(spec.metric) if spec.metric else None
            if entry is not None and entry.null is not None:  # a key of the calibration test
                raise SelcalError(f"{option} {spec.text}: {path} has no {spec.metric}; evaluate with "
                                  f"{said('calibration_test', metavar='M')} (e.g. 1000) to test calibration")
            raise SelcalError(f"{option} {spec.text}: {path} has no such metric; "
                              "names look like msp.aurc (or aurc_msp, the CSV's column), aurc (every score), accuracy, "
                              f"MODEL:msp.aurc or GROUP/msp.aurc (a group's, {said('group_col')})")
