"""Metric specs of the options (``msp.aurc``, ``aurc``, ``MODEL:msp.aurc``) and bounds
(``METRIC=VALUE``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import SelcalError
from ..metrics.catalog import better
from ..scores import REGISTRY as SCORE_NAMES
from .load import HIGHER_IS_BETTER, LOWER_IS_BETTER, Metric


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class Spec:
    """Which metrics an option names: ``[MODEL:][SCORE.]METRIC``, or ``*`` for every metric."""

    text: str
    model: str | None
    score: str | None
    metric: str | None  # None: every metric

    def matches(self, metric: Metric) -> bool:
        return ((self.model is None or self.model == metric.model)
                and (self.metric is None or self.metric == metric.metric)
                and (self.score is None or self.score == metric.score))

    @property
    def specificity(self) -> tuple[int, int, int]:
        return (self.score is not None, self.model is not None, self.metric is not None)


def parse_spec(text: str, option: str) -> Spec:
    """``msp.aurc``, ``aurc`` (every score's), ``accuracy``, ``resnet:msp.aurc``, ``*``.

    Examples
    --------
    >>> parse_spec("msp.cov@0.05", "--max")
    Spec(text='msp.cov@0.05', model=None, score='msp', metric='cov@0.05')
    """
    model, _, name = text.strip().rpartition(":")
    name = name.strip()
    model = model.strip() or None
    if name == "*":
        return Spec(text, model, None, None)
    head, dot, tail = name.partition(".")
    # a registered score, or any other name before a metric with a direction: a score column (--score-col)
    score, metric = (head, tail) if dot and (head in SCORE_NAMES or better(tail) is not None) else (None, name)
    if not metric or better(metric) is None:
        known = ", ".join(LOWER_IS_BETTER + HIGHER_IS_BETTER + ("cov@R", "risk@C"))
        raise SelcalError(f"{option} {text}: '{metric or name}' is not a metric with a direction; "
                          f"use [SCORE.]METRIC with METRIC one of {known}")
    return Spec(text, model, score, metric)


def parse_specs(texts: Iterable[str], option: str) -> list[Spec]:
    return [parse_spec(t, option) for t in texts or ()]


def parse_bounds(texts: Iterable[str], option: str) -> list[tuple[Spec, float]]:
    """``["msp.aurc=0.06", ...]`` -> [(Spec, 0.06), ...]; bad syntax raises SelcalError."""
    out = []
    for text in texts or ():
        name, equals, value = text.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not equals or not name.strip() or not math.isfinite(number):
            raise SelcalError(f"{option} takes METRIC=VALUE, e.g. {option} msp.aurc=0.06; got {text!r}")
        if option == "--tolerance" and number < 0:
            raise SelcalError(f"--tolerance {text}: a tolerance must be >= 0")
        out.append((parse_spec(name, option), number))
    return out


def most_specific(bounds: Sequence[tuple[Spec, float]], metric: Metric) -> float | None:
    matching = [(spec.specificity, index, value) for index, (spec, value) in enumerate(bounds) if spec.matches(metric)]
    return max(matching)[2] if matching else None


def require_matches(specs: Iterable[Spec], metrics: Sequence[Metric], option: str, path: str) -> None:
    for spec in specs:
        if not any(spec.matches(m) for m in metrics):
            raise SelcalError(f"{option} {spec.text}: {path} has no such metric; "
                              "names look like msp.aurc, aurc (every score), accuracy or MODEL:msp.aurc")
