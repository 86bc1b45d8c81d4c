"""--group-col: per-group metrics in the JSON and the terminal table, each computed on the group's rows."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles import ref_posthoc
from typer.testing import CliRunner

from selcal.cli import app


@pytest.fixture()
def grouped(tmp_path):
    rng = np.random.default_rng(7)
    n, k = 900, 6
    labels = rng.integers(0, k, n)
    source = np.where(rng.random(n) < 0.3, "shifted", "clean")
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += np.where(source == "clean", 2.5, 0.8)
    logits = np.round(logits, 1)  # ties, so the groups' tie handling is exercised
    path = tmp_path / "grouped.parquet"
    pq.write_table(pa.table({
        "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), k),
        "label": labels, "source": source,
    }), path)
    return path, logits, labels, source


def test_group_metrics_are_those_of_the_group_rows_alone(grouped):
    path, logits, labels, source = grouped
    result = CliRunner().invoke(app, ["evaluate", str(path), "--group-col", "source", "--scores", "msp,max_logit",
                                      "--json", "-"])
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["models"][0]["groups"]
    assert sorted(groups) == ["clean", "shifted"]
    for name, values in groups.items():
        rows = source == name
        correct = logits[rows].argmax(axis=1) == labels[rows]
        assert values["n_eval"] == rows.sum()
        assert values["accuracy"] == correct.mean()
        msp_aurc = ref_posthoc.brute_aurc(ref_posthoc.msp_rank_score(logits[rows]), correct)
        assert values["scores"]["msp"]["aurc"] == pytest.approx(msp_aurc, rel=1e-12)
        max_logit_aurc = ref_posthoc.brute_aurc(logits[rows].max(axis=1), correct)
        assert values["scores"]["max_logit"]["aurc"] == pytest.approx(max_logit_aurc, rel=1e-12)


def test_the_terminal_table_lists_every_group(grouped):
    path, *_ = grouped
    result = CliRunner().invoke(app, ["evaluate", str(path), "--group-col", "source", "--scores", "msp,max_logit"])
    assert result.exit_code == 0, result.output
    assert "per group" in result.stdout
    assert "clean" in result.stdout and "shifted" in result.stdout


def test_an_unknown_group_column_is_one_error_line(grouped):
    path, *_ = grouped
    result = CliRunner().invoke(app, ["evaluate", str(path), "--group-col", "domain"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "no group column 'domain'" in result.stderr
