"""A bound outside the values a metric can take never fails (``--max msp.aurc=150%``) or never passes
(``--max msp.aurc=-1%``): it is refused, saying the metric's range (the catalog's ``values_range``:
[0, 1] for a fraction, [0, inf) for NLL, [0, 2] for Brier) and what to write. A tolerance wider than
the range never fails either. Unbounded metrics take any bound at or above their floor (NLL 50)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from selcal.checks import parse_bound
from selcal.errors import SelcalError
from selcal.metrics import catalog


def refused(text: str, option: str = "--max") -> str:
    with pytest.raises(SelcalError) as error:
        parse_bound(text, option)
    return str(error.value)


@pytest.mark.parametrize("option, text, message", [
    ("--max", "msp.aurc=150%", "AURC is between 0% and 100%: a bound of 150% never fails; write a value between 0% "
                               "and 100%"),
    ("--max", "msp.aurc=-1%", "AURC is between 0% and 100%: a bound of -1% never passes; write a value between 0% "
                              "and 100%"),
    ("--min", "msp.aurc=-1%", "AURC is between 0% and 100%: a bound of -1% never fails; write a value between 0% "
                              "and 100%"),
    ("--min", "accuracy=101%", "accuracy is between 0% and 100%: a bound of 101% never passes; write a value between "
                               "0% and 100%"),
    ("--max", "aurc_msp=-0.05", "AURC is between 0% and 100%: a bound of -5% never passes; write a value between 0% "
                                "and 100%"),
    ("--max", "msp.cov@5%=120%", "cov@risk 5% is between 0% and 100%: a bound of 120% never fails; write a value "
                                 "between 0% and 100%"),
    ("--max", "nll=-1", "NLL is at least 0: a bound of -1 never passes; write a value of at least 0"),
    ("--max", "brier=3", "Brier is between 0 and 2: a bound of 3 never fails; write a value between 0 and 2"),
    ("--min", "msp.ece_p=1.5", "ECE p-value is between 0 and 1: a bound of 1.5 never passes; write a value between "
                               "0 and 1"),
    ("--max", "*=-1%", "every metric is at least 0%: a bound of -1% never passes; write a value of at least 0%"),
    ("--tolerance", "msp.aurc=150%", "AURC is between 0% and 100%, so two values never differ by more than 100%: a "
                                     "tolerance of 150% never fails; write a value between 0% and 100%"),
    ("--tolerance", "brier=2.5", "Brier is between 0 and 2, so two values never differ by more than 2: a tolerance "
                                 "of 2.5 never fails; write a value between 0 and 2"),
])
def test_a_bound_outside_the_metric_range_is_refused_with_the_range(option, text, message):
    assert refused(text, option) == f"{option} {text}: {message}"


@pytest.mark.parametrize("option, text, value", [
    ("--max", "msp.aurc=100%", 1.0), ("--max", "msp.aurc=0%", 0.0), ("--min", "accuracy=1", 1.0),
    ("--max", "nll=50", 50.0), ("--tolerance", "nll=10", 10.0), ("--max", "brier=2", 2.0),
    ("--tolerance", "msp.aurc=100%", 1.0), ("--min", "msp.ece_p=0.05", 0.05),
])
def test_a_bound_at_the_edges_or_of_an_unbounded_metric_is_read(option, text, value):
    assert parse_bound(text, option)[1] == value


@given(st.sampled_from([key for key, m in catalog.CATALOG.items() if m.lower_is_better is not None and not m.family]),
       st.floats(-3, 3, allow_nan=False), st.sampled_from(["--max", "--min"]))
def test_every_judged_metric_takes_exactly_the_bounds_within_its_range(key, value, option):
    low, high = catalog.values_range(key)
    text = f"msp.{key}={value!r}" if catalog.get(key).levels != ("model",) else f"{key}={value!r}"
    if catalog.unit(key) == "pct" and abs(value) > 1:
        return  # a bare number beyond 1 of a percent metric: refused as percent-or-fraction (test_bound_units...)
    if low <= value <= high:
        assert parse_bound(text, option)[1] == value
    else:
        assert "never" in refused(text, option)
    assert low == 0.0 and (high in (1.0, 2.0) or math.isinf(high))
