"""``selcal threshold --dtype float32`` on float64 logits beyond float32's range: a logit of 1e39
is inf in float32 and its softmax NaN (as in a float32 service), so the run is refused in one
line naming the file and the row, exit 2, no JSON written (it was a ValueError traceback from
the risk-coverage curve); -1e39 in a class that is not the top one is -inf, harmless, and runs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from selcal.cli import app


def write(path, big: float, row: int, k: int):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 1000)
    logits = rng.normal(size=(1000, 3))
    logits[np.arange(1000), labels] += 2.5
    logits[row, k] = big
    pl.DataFrame({"label": labels, "logits": logits.tolist(), "split": ["val"] * 400 + ["test"] * 600}).write_parquet(path)
    return path


@pytest.mark.parametrize("score", ["msp", "temp"])
def test_a_logit_beyond_float32_is_refused_in_one_line(tmp_path, score):
    path = write(tmp_path / "m.parquet", 1e39, 450, 0)
    out = CliRunner().invoke(app, ["threshold", str(path), "--dtype", "float32", "--score", score, "--risk", "0.1",
                                   "--json", str(tmp_path / "t.json")])
    assert out.exit_code == 2, out.output
    assert "m.parquet" in out.stderr and "beyond float32's range" in out.stderr and "row " in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.json").exists()


def test_a_negative_logit_beyond_float32_is_minus_infinity_and_certified(tmp_path):
    path = write(tmp_path / "m.parquet", -1e39, 450, 0)
    out = CliRunner().invoke(app, ["threshold", str(path), "--dtype", "float32", "--risk", "0.1"])
    assert out.exit_code == 0, out.output
    assert "RuntimeWarning" not in out.stderr
