"""Per-group intervals (``evaluate --group-col G --bootstrap B``): every per-group metric gets its interval,
the rows resampled within each group; in the JSON (the ``ci`` form of the model's), the table, the report,
and ``check`` judges a group's metric (``--max shifted/msp.aurc=...``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import selcal
from selcal.bootstrap import canonical_order, draw_resamples, percentile_interval
from selcal.bootstrap.data import RowData
from selcal.cli import app
from selcal.metrics import selective

LSPAIR = "sample_logits/lspair_alpha0.1.parquet"


def grouped(seed=0, n=500):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, (n, 3))
    groups = np.where(np.arange(n) % 3 == 0, "shifted", "clean")
    noise = np.where(groups == "shifted", 0.5, 0.85)
    labels = np.where(rng.random(n) < noise, logits.argmax(1), rng.integers(0, 3, n))
    return logits, labels, groups


def brute_force(scores: dict, correct, resamples, seed, confidence):
    """Each resample literally: the group's rows in their content order, the drawn rows, the plain selective
    metrics of each score; then the percentile interval of each."""
    data = RowData(correct=correct, scores=scores)
    order = canonical_order(data)
    values: dict = {}
    for block in draw_resamples(correct.size, resamples, seed):
        for draw in block:
            rows = order[draw]
            values.setdefault("accuracy", []).append(correct[rows].mean())
            for name, score in scores.items():
                metrics = selective.selective_metrics(selective.risk_coverage(score[rows], correct[rows]))
                for key, value in metrics.items():
                    values.setdefault(f"{name}.{key}", []).append(np.nan if value is None else value)
    return {key: percentile_interval(np.array(v), confidence) for key, v in values.items()}


def test_each_groups_intervals_are_a_bootstrap_of_its_own_rows():
    logits, labels, groups = grouped()
    result = selcal.evaluate_arrays(logits, labels, groups=groups, scores="msp,max_logit", bootstrap=40, seed=5,
                                    confidence=0.9)
    model = result.models[0]
    for index, (group, values) in enumerate(model.extra["groups"].items()):
        members = model.groups == group
        scores = {name: model.score_values[name][members] for name in ("msp", "max_logit")}
        seed = int(np.random.SeedSequence([5, index]).generate_state(1)[0])
        want = brute_force(scores, model.rows.correct[members], 40, seed, 0.9)
        assert values["ci"]["accuracy"] == pytest.approx(want["accuracy"], abs=1e-12)
        for name in scores:
            assert set(values["scores"][name]["ci"]) == {k for k in values["scores"][name] if k != "ci"}
            for key, interval in values["scores"][name]["ci"].items():
                expected = want[f"{name}.{key}"]
                assert (interval is None) == (expected is None), (group, name, key)
                if interval is not None:
                    assert interval == pytest.approx(expected, abs=1e-12), (group, name, key)


def test_a_group_without_errors_has_a_point_accuracy_interval_and_no_auroc_interval():
    """Resampling within the group: a group of correct rows stays all correct in every resample (the
    model's resamples would mix in the other group's errors)."""
    logits, labels, groups = grouped(1)
    labels = np.where(groups == "shifted", logits.argmax(1), labels)
    model = selcal.evaluate_arrays(logits, labels, groups=groups, scores="msp", bootstrap=30).models[0]
    shifted = model.extra["groups"]["shifted"]
    assert shifted["accuracy"] == 1.0 and shifted["ci"]["accuracy"] == [1.0, 1.0]
    assert shifted["scores"]["msp"]["ci"]["aurc"] == [0.0, 0.0]
    assert shifted["scores"]["msp"]["ci"]["auroc"] is None


def test_group_intervals_follow_the_seed_not_the_row_order():
    logits, labels, groups = grouped(2)
    first = selcal.evaluate_arrays(logits, labels, groups=groups, scores="msp", bootstrap=30, seed=1).models[0]
    order = np.random.default_rng(0).permutation(labels.size)
    shuffled = selcal.evaluate_arrays(logits[order], labels[order], groups=groups[order], scores="msp", bootstrap=30,
                                      seed=1).models[0]
    other = selcal.evaluate_arrays(logits, labels, groups=groups, scores="msp", bootstrap=30, seed=2).models[0]
    for group in ("clean", "shifted"):
        assert first.extra["groups"][group]["scores"] == shuffled.extra["groups"][group]["scores"]
        assert first.extra["groups"][group]["scores"] != other.extra["groups"][group]["scores"]


@pytest.mark.slow
def test_the_cli_shows_and_writes_group_intervals_and_check_judges_a_group(tmp_path):
    out, report = tmp_path / "r.json", tmp_path / "r.html"
    runner = CliRunner()
    ran = runner.invoke(app, ["evaluate", LSPAIR, "--group-col", "source", "--scores", "msp,temp", "--bootstrap", "50",
                              "--json", str(out), "--report", str(report), "--figures", "rc"])
    assert ran.exit_code == 0, ran.output
    assert "resampled within each group" in ran.output
    groups = json.loads(out.read_text())["models"][0]["groups"]
    low, high = groups["shifted"]["scores"]["msp"]["ci"]["aurc"]
    assert low <= groups["shifted"]["scores"]["msp"]["aurc"] <= high
    assert "resampled within each group" in report.read_text()
    for spelling in ("shifted/msp.aurc", "shifted.msp.aurc"):
        failed = runner.invoke(app, ["check", str(out), "--max", f"{spelling}=1%"])
        assert failed.exit_code == 1 and "shifted/msp AURC" in failed.output, failed.output
    passed = runner.invoke(app, ["check", str(out), "--max", "shifted/msp.aurc=50%", "--min", "clean/accuracy=50%"])
    assert passed.exit_code == 0, passed.output
    missing = runner.invoke(app, ["check", str(out), "--max", "nowhere/msp.aurc=50%"])
    assert missing.exit_code == 2 and "GROUP/msp.aurc" in missing.output
    # a bound without a group judges the model's metric only, as before
    model_only = runner.invoke(app, ["check", str(out), "--max", "msp.aurc=50%", "--json", str(tmp_path / "c.json")])
    assert model_only.exit_code == 0
    assert [row["metric"] for row in json.loads((tmp_path / "c.json").read_text())["rows"]] == ["msp.aurc"]
