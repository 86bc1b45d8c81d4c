"""A bound written as the tables show it (``85.4%``) is the fraction the JSON holds (0.854), to the
last bit: ``85.4 / 100`` in floating point is 0.8540000000000001, which failed ``--min accuracy=85.4%``
against an accuracy of exactly 0.854 (and passed ``--min accuracy=0.854``)."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from selcal.checks import parse_bound
from selcal.cli import app


@given(st.integers(0, 4).flatmap(lambda places: st.tuples(st.integers(0, 100 * 10 ** places), st.just(places))))
def test_a_percent_is_the_nearest_float_to_its_fraction(percent):
    k, places = percent  # every percent from 0% to 100% with up to 4 places (beyond 100% an AURC bound is refused)
    text = str(Decimal(k).scaleb(-places))  # 85.4, 0.05, 100.0000
    [_, number] = parse_bound(f"msp.aurc={text}%", "--max")
    assert number == float(Fraction(k, 10 ** places * 100))


def test_the_accuracy_the_table_shows_passes_its_own_bound(tmp_path):
    labels = np.arange(500) % 4
    logits = np.zeros((500, 4))
    logits[np.arange(500), labels] = np.linspace(1.0, 3.0, 500)
    wrong = np.arange(500) >= 427  # 427 of 500 right: accuracy 0.854, shown as 85.40%
    logits[wrong, (labels[wrong] + 1) % 4] = 5.0
    np.savez(tmp_path / "m.npz", logits=logits, labels=labels)
    np.savez(tmp_path / "val.npz", logits=logits, labels=labels)
    runner = CliRunner()
    out = runner.invoke(app, ["evaluate", str(tmp_path / "m.npz"), "--val", str(tmp_path / "val.npz"),
                              "--json", str(tmp_path / "m.json"), "-q"])
    assert out.exit_code == 0, out.output
    assert json.loads((tmp_path / "m.json").read_text())["models"][0]["accuracy"] == 0.854 != 85.4 / 100
    for bound in ("accuracy=85.4%", "accuracy=0.854"):
        for option in ("--min", "--max"):
            out = runner.invoke(app, ["check", str(tmp_path / "m.json"), option, bound, "-q"])
            assert out.exit_code == 0, (option, bound, out.output)
