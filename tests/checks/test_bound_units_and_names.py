"""Bounds in the unit the tables show, and one set of names per metric (CONVENTIONS.md, "Bounds and
metric names").

A bound or tolerance is given as the tables show it (``6%``) or as the fraction the JSON holds
(``0.06``); a bare number that cannot be a fraction of a metric shown in percent (``msp.aurc=6``,
600%) is refused with both ways to write it. ``msp.aurc`` (the JSON's) and ``aurc_msp`` (the
leaderboard CSV's column) name the same metric in ``--max``, ``--min``, ``--tolerance``,
``--metric`` and ``--sort-by``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from selcal.checks import parse_bounds, parse_spec
from selcal.cli import app
from selcal.errors import SelcalError
from selcal.metrics import catalog
from selcal.scores import REGISTRY

runner = CliRunner()


def write_npz(path, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, 400)
    logits = rng.normal(0.0, 1.5, (400, 4))
    logits[np.arange(400), labels] += rng.gamma(2.0, 1.0, 400)
    np.savez(path, logits=logits, labels=labels)
    return path


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bounds")
    a, b = write_npz(folder / "a.npz", 0), write_npz(folder / "b.npz", 1)
    out = runner.invoke(app, ["evaluate", str(a), "--json", str(folder / "a.json"), "-q"])
    assert out.exit_code == 0, out.output
    return folder / "a.json", a, b


def check(path, *args):
    out = runner.invoke(app, ["check", str(path), *args, "--json", "-"])
    return out, (json.loads(out.stdout) if out.exit_code in (0, 1) else None)


# --------------------------------------------------------------------------- units
def test_a_bare_percent_number_is_refused_with_both_spellings(result):
    out, _ = check(result[0], "--max", "msp.aurc=6")
    assert out.exit_code == 2
    assert "600%" in out.stderr and "msp.aurc=6%" in out.stderr and "msp.aurc=0.06" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_percent_is_the_fraction_the_json_holds(result):
    aurc = json.loads(result[0].read_text())["models"][0]["scores"]["msp"]["aurc"]
    above, below = f"{100 * aurc * 1.01:.6f}%", f"{100 * aurc * 0.99:.6f}%"
    out, report = check(result[0], "--max", f"msp.aurc={above}")
    assert out.exit_code == 0, out.output
    out, report = check(result[0], "--max", f"msp.aurc={below}")
    assert out.exit_code == 1, out.output
    row = next(r for r in report["rows"] if r["metric"] == "msp.aurc")
    assert row["reference"] == pytest.approx(aurc * 0.99, rel=1e-5)


@pytest.mark.parametrize("text, value", [("msp.aurc=6%", 0.06), ("msp.aurc=0.06", 0.06), ("msp.aurc=1", 1.0),
                                         ("msp.aurc= 0.5 %", 0.005), ("accuracy=90%", 0.9), ("nll=2.5", 2.5),
                                         ("msp.cov@5%=80%", 0.8), ("*=0.5%", 0.005), ("brier=0.3", 0.3)])
def test_accepted_bounds(text, value):
    [(_, number)] = parse_bounds([text], "--max")
    assert number == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("text, words", [("msp.aurc=6", "600%"), ("accuracy=90", "9000%"), ("*=2", "* covers"),
                                         ("msp.ece=-3", "-300%"), ("nll=5%", "not shown in percent"),
                                         ("msp.aurc=6%%", "METRIC=VALUE"), ("msp.aurc=%", "METRIC=VALUE")])
def test_refused_bounds(text, words):
    with pytest.raises(SelcalError) as exc_info:
        parse_bounds([text], "--max")
    assert words in str(exc_info.value)


def test_a_tolerance_in_percent_points(result):
    out, report = check(result[0], "--baseline", str(result[0]), "--tolerance", "aurc=0.5%")
    assert out.exit_code == 0, out.output
    with pytest.raises(SelcalError, match="600%"):
        parse_bounds(["aurc=6"], "--tolerance")


# --------------------------------------------------------------------------- names
@pytest.mark.slow
@given(key=st.sampled_from([k for k, m in catalog.CATALOG.items() if not m.family and "score" in m.levels]),
       score=st.sampled_from(sorted(REGISTRY) + ["my_col", "a_b_c"]))
def test_the_csv_column_and_the_json_name_are_one_metric(key, score):
    assert catalog.split_name(catalog.column(score, key)) == (score, key)
    assert catalog.split_name(f"{score}.{key}") == (score, key)


@given(family=st.sampled_from(["cov@", "risk@"]), percent=st.sampled_from([1, 5, 10, 50, 0.5, 2.5]),
       score=st.sampled_from(sorted(REGISTRY)))
def test_a_family_value_in_percent_is_its_key(family, percent, score):
    key = f"{family}{percent / 100:g}"
    assert catalog.split_name(f"{score}.{family}{percent:g}%") == (score, key)
    assert catalog.split_name(f"{family}{percent:g}%_{score}") == (score, key)


def test_max_takes_the_csv_column_name(result):
    by_column, report_a = check(result[0], "--max", "aurc_msp=0.5")
    by_name, report_b = check(result[0], "--max", "msp.aurc=0.5")
    assert by_column.exit_code == by_name.exit_code == 0, by_column.output
    assert [r["reference"] for r in report_a["rows"]] == [r["reference"] for r in report_b["rows"]]
    assert parse_spec("ece_temp", "--max").metric == "ece" and parse_spec("ece_temp", "--max").score == "temp"


def test_metric_takes_the_csv_column_name(result):
    out, report = check(result[0], "--baseline", str(result[0]), "--metric", "aurc_max_logit")
    assert out.exit_code == 0, out.output
    assert [r["metric"] for r in report["rows"]] == ["max_logit.aurc"]


@pytest.mark.slow
def test_sort_by_takes_the_name_check_takes(result):
    _, a, b = result
    by_name = runner.invoke(app, ["evaluate", str(a), str(b), "--sort-by", "msp.aurc", "--csv", "-"])
    by_column = runner.invoke(app, ["evaluate", str(a), str(b), "--sort-by", "aurc_msp", "--csv", "-"])
    assert by_name.exit_code == 0, by_name.output
    assert by_name.stdout == by_column.stdout
    header = by_name.stdout.splitlines()[0].split(",")
    aurc = [float(dict(zip(header, line.split(",")))["aurc_msp"]) for line in by_name.stdout.splitlines()[1:]]
    assert aurc == sorted(aurc)
    temp = runner.invoke(app, ["evaluate", str(a), str(b), "--sort-by", "temp.ece", "--csv", "-"])
    assert temp.exit_code == 0, temp.output  # the column ece_temp
    bad = runner.invoke(app, ["evaluate", str(a), str(b), "--sort-by", "msp.nonsense"])
    assert bad.exit_code == 2 and "msp.aurc is aurc_msp" in bad.stderr
