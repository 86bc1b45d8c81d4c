"""Every risk r and δ in (0, 1) either gives an answer or is refused in one line (issue 33, "Threshold
edges": ``--risk 5e-324`` ended in an OverflowError traceback); and the answer never reads as a
promise it is not (a target just below 1 never prints as 100%)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import make_data, one_error_line, strict_json
from hypothesis import example, given, settings
from hypothesis import strategies as st

import selcal
from selcal.threshold import guarantee as th
from selcal.errors import SelcalError
from selcal.threshold.run import threshold_dump
from selcal.io import read_dump

TINY = 5e-324  # the smallest positive float64 (a subnormal)
BELOW_ONE = 0.9999999999999999  # the largest float64 below 1


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    from helpers import Dumps

    logits, labels = make_data(n=600, seed=4, accuracy=0.9)
    path = Dumps(tmp_path_factory.mktemp("levels")).parquet("m.parquet", logits, labels,
                                                            split=["val"] * 400 + ["test"] * 200)
    return path


def test_the_smallest_risk_is_refused_in_one_line_naming_the_rows_it_needs(cli, dump):
    line = one_error_line(cli("threshold", dump, "--risk", "5e-324"))
    # (1 - 5e-324)^m < 0.1 / ⌈log2 m⌉ needs about 5.4e+324 rows: counted exactly, beyond float64's range
    assert "400 calibration rows cannot certify a selective risk of at most 4.94e-322%" in line
    assert "e+324 rows" in line
    assert th.minimum_rows(TINY, 0.1) > 10 ** 324 and th.minimum_rows(TINY, 0.1, "ltt") > 10 ** 323


def test_the_smallest_delta_is_refused_in_one_line(cli, dump):
    line = one_error_line(cli("threshold", dump, "--delta", "5e-324"))
    assert "--delta must be at least 1e-300" in line and "smallest normal" in line
    assert cli("threshold", dump, "--delta", "1e-300", "--risk", "0.9").exit_code == 0


def test_a_risk_just_below_one_is_not_printed_as_one_hundred_percent(cli, dump):
    result = cli("threshold", dump, "--risk", repr(BELOW_ONE))
    assert result.exit_code == 0, result.stderr
    assert "selective risk at most 99.99999999999999%" in result.stdout and "at most 100.0%" not in result.stdout
    answer = strict_json(cli("threshold", dump, "--risk", repr(BELOW_ONE), "--json", "-").stdout)
    assert answer["risk_target"] == BELOW_ONE


@pytest.mark.parametrize("text,why", [("1e-400", "rounds to 0 in float64"), ("0.99999999999999999", "rounds to 1")])
def test_a_level_that_rounds_out_of_the_interval_says_so(cli, dump, text, why):
    assert why in one_error_line(cli("threshold", dump, "--risk", text))


def test_minimum_rows_never_overflows_and_agrees_with_the_closed_form():
    for risk in (TINY, 1e-300, 1e-200, 1e-20, 1e-16):
        for delta in (0.1, 1e-300):
            for method in th.METHODS:
                rows = th.minimum_rows(risk, delta, method)
                steps = th.sgr_steps(rows) if method == "sgr" else 1
                # (1 - r)^m < δ/k  <=>  m > log(δ/k) / -log1p(-r), to the relative precision of the logs
                estimate = math.log(delta / steps) / -math.log1p(-risk) if method == "sgr" else \
                    math.log(delta) / -math.log1p(-risk)
                assert abs(rows - (-estimate)) <= 2 + abs(estimate) * 1e-12 if math.isfinite(estimate) else rows > 1e308


# the Python API over the whole open interval, extremes included: an answer or a SelcalError, never another
levels = st.one_of(st.floats(0, 1, exclude_min=True, exclude_max=True),
                   st.sampled_from([TINY, 1e-310, 1e-300, 2.2250738585072014e-308, 1e-16, 0.5, 1 - 1e-16, BELOW_ONE]))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(levels, levels, st.sampled_from(th.METHODS))
@example(TINY, 0.1, "sgr")  # (an OverflowError traceback before)
@example(0.5, TINY, "ltt")
def test_every_level_in_the_open_interval_answers_or_is_refused(dump_whole, risk, delta, method):
    try:
        result = threshold_dump(dump_whole, risk=risk, delta=delta, method=method)
    except SelcalError as exc:
        assert "\n" not in str(exc)
        return
    entry = result.entries[0]
    assert "\n" not in result.sentence(entry)
    answer = strict_json(result.to_json())
    assert answer["risk_target"] == risk and answer["delta"] == delta
    if not entry.certificate.abstain_all:
        assert entry.certificate.bound <= risk


@pytest.fixture(scope="module")
def dump_whole(dump):
    return read_dump(dump)


def test_guarantee_functions_take_every_level_or_raise_value_error():
    score, correct = np.arange(50.0), np.ones(50, bool)
    for risk in (TINY, 1e-300, 0.5, BELOW_ONE):
        for delta in (1e-300, 0.5, BELOW_ONE):
            for method in ("sgr", "ltt", "empirical"):
                th.certify(score, correct, risk=risk, delta=delta, method=method)
    for delta in (TINY, 1e-310, sys.float_info.min):  # below the floor: a ValueError that says why
        with pytest.raises(ValueError, match="at least 1e-300"):
            th.sgr(score, correct, delta=delta)


def test_a_delta_split_over_the_groups_below_the_floor_is_refused_in_one_line(cli):
    lspair = Path(__file__).resolve().parents[2] / "sample_logits" / "lspair_alpha0.parquet"
    line = one_error_line(cli("threshold", lspair, "--risk", "0.9", "--group-col", "source", "--delta", "1e-300"))
    assert "--delta: delta 1e-300 split over 2 groups is 5e-301, below 1e-300" in line and "--delta-per-group" in line
    assert cli("threshold", lspair, "--risk", "0.9", "--group-col", "source", "--delta", "1e-300",
               "--delta-per-group").exit_code == 0


def test_risk_and_delta_in_percent_certify_exactly_as_the_fractions(cli, dump, tmp_path):
    # The tables print risks in percent; a user copies "5%" back into --risk (it was refused).
    as_percent = cli("threshold", dump, "--risk", "5%,10%", "--delta", "20%", "--json", tmp_path / "p.json")
    as_fraction = cli("threshold", dump, "--risk", "0.05,0.1", "--delta", "0.2", "--json", tmp_path / "f.json")
    assert as_percent.exit_code == as_fraction.exit_code == 0, as_percent.stderr
    assert as_percent.stdout == as_fraction.stdout
    assert (tmp_path / "p.json").read_text() == (tmp_path / "f.json").read_text()


@pytest.mark.parametrize("option, value, said", [
    ("--risk", "0%", "got '0%'"), ("--risk", "100%", "got '100%'"), ("--risk", "x%", "got 'x%'"),
    ("--delta", "0", "got '0'"), ("--delta", "150%", "got '150%'"),
    ("--risk", "1e-400", "got '1e-400' (it rounds to 0 in float64)"),
    ("--delta", "1e-400%", "got '1e-400%' (it rounds to 0 in float64)"),
])
def test_a_level_outside_the_open_interval_is_refused_saying_only_what_is_true(cli, dump, option, value, said):
    line = one_error_line(cli("threshold", dump, option, value))
    assert line.endswith(said), line  # "0%" is 0: it does not "round to 0"


@pytest.mark.parametrize("value, said", [
    ("0", "got '0'"), ("1", "got '1'"), (" 1.0 ", "got ' 1.0 '"), ("0e5", "got '0e5'"), (0.0, "got 0.0"), (1, "got 1"),
    ("1e-400", "got '1e-400' (it rounds to 0 in float64)"),
    ("0.99999999999999999", "got '0.99999999999999999' (it rounds to 1 in float64)"),
])
def test_check_level_says_rounds_only_of_a_number_inside_the_interval(value, said):
    # One rule with the command line's (rounds_to_a_bound): a written "0" or "1" is the bound, not a rounding.
    with pytest.raises(ValueError) as refused:
        th.check_level(value, "risk")
    assert str(refused.value).endswith(said), str(refused.value)
