"""A fitted score registered from outside the package flows through everything the built-in
scores do: evaluation in memory and streamed, --bootstrap-refit (its fit called on every
resample), the JSON (its state), the table, the leaderboard, the figures, the HTML report,
check and compare, and the CLI through an entry point of the group ``selcal.scores``.

The score is a calibrator whose probabilities have their own argmax (softmax of the logits
plus a class-prior shift fitted on the validation rows), so it is also judged as the
classifier it produces (CONVENTIONS.md, "Post-hoc calibrators").
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import selcal
from selcal.cli import app
from selcal.metrics import calibration, selective
from selcal.scores import REGISTRY

K = 4
FIT_CALLS: list[int] = []


def prior_fit(val_logits, val_labels, options):
    """log of the smoothed class frequencies of the validation rows: a JSON-serialisable state."""
    FIT_CALLS.append(int(np.asarray(val_labels).size))
    counts = np.bincount(np.asarray(val_labels), minlength=np.asarray(val_logits).shape[1]) + 1.0
    return {"bias": np.log(counts / counts.sum()).tolist()}


def prior_probabilities(logits, state):
    z = np.asarray(logits, dtype=np.float64) + np.asarray(state["bias"])
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def prior_score(logits, state):
    return prior_probabilities(logits, state).max(axis=1)


@pytest.fixture
def prior():
    entry = selcal.register_score("prior", score=prior_score, fit=prior_fit, probabilities=prior_probabilities,
                                  description="softmax of the logits plus the log class prior")
    FIT_CALLS.clear()
    yield entry
    REGISTRY.pop("prior")


def data(seed=0, n=600, k=K):
    rng = np.random.default_rng(seed)
    labels = rng.choice(k, size=n, p=[0.55, 0.25, 0.15, 0.05][:k])
    logits = rng.normal(0.0, 1.5, size=(n, k))
    logits[np.arange(n), labels] += 1.2
    return logits, labels


def write_dump(path, seed=0):
    logits, labels = data(seed)
    split = np.where(np.arange(labels.size) % 3 == 0, "val", "test")
    pq.write_table(pa.table({"logits": list(logits.astype(np.float32)), "label": labels, "split": split}), path)
    return logits.astype(np.float32).astype(np.float64), labels, split


def test_the_registered_score_is_measured_as_the_classifier_it_produces(prior):
    logits, labels = data()
    val_logits, val_labels = data(seed=1)
    result = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, scores="msp,prior")
    metrics = result.scores["prior"]
    state = prior_fit(val_logits, val_labels, None)
    assert metrics["state"] == state  # the JSON keeps the fitted state
    p = prior_probabilities(logits, state)
    own_correct = p.argmax(axis=1) == labels
    assert own_correct.mean() != result.accuracy  # the shift changes some predictions
    assert metrics["accuracy"] == own_correct.mean()
    confidence = p.max(axis=1)
    curve = selective.risk_coverage(confidence, own_correct)
    assert metrics["aurc"] == pytest.approx(selective.aurc(curve), abs=1e-15)
    assert metrics["ece"] == pytest.approx(calibration.expected_calibration_error(confidence, own_correct, 15),
                                           abs=1e-15)
    assert metrics["nll"] == pytest.approx(-np.log(p[np.arange(labels.size), labels]).mean(), rel=1e-12)
    onehot = np.eye(K)[labels]
    assert metrics["brier"] == pytest.approx(((p - onehot) ** 2).sum(axis=1).mean(), rel=1e-12)
    assert metrics["cece"] == pytest.approx(calibration.classwise_calibration_error(
        calibration.classwise_bins(p, labels, 15)), abs=1e-12)
    json.loads(result.to_json())  # serialisable


def test_streamed_and_in_memory_give_the_same_bytes(prior, tmp_path):
    path = tmp_path / "m.parquet"
    write_dump(path)
    whole = selcal.evaluate(str(path), scores="msp,temp,prior", chunk_rows=64)
    streamed = selcal.evaluate(str(path), scores="msp,temp,prior", stream=True, chunk_rows=50)
    assert whole.to_json() == streamed.to_json()
    assert "state" in whole.scores["prior"]


def test_bootstrap_refit_calls_the_fit_on_every_resample(prior, tmp_path):
    path = tmp_path / "m.parquet"
    write_dump(path)
    result = selcal.evaluate(str(path), scores="msp,prior", bootstrap=6, bootstrap_refit=True)
    assert len(FIT_CALLS) == 1 + 6  # the point estimate, then one refit per resample
    assert result.bootstrap["refit"] is True
    ci = result.scores["prior"]["ci"]
    assert ci["aurc"][0] <= result.scores["prior"]["aurc"] <= ci["aurc"][1] or ci["aurc"][0] < ci["aurc"][1]
    assert "accuracy" in ci and "nll" in ci
    FIT_CALLS.clear()
    plain = selcal.evaluate(str(path), scores="msp,prior", bootstrap=6)
    assert len(FIT_CALLS) == 1 and "aurc" in plain.scores["prior"]["ci"]


@pytest.mark.slow
def test_every_output_of_the_cli_shows_it(prior, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_dump(a, seed=0)
    write_dump(b, seed=2)
    runner = CliRunner()
    out = runner.invoke(app, ["evaluate", str(a), "--scores", "msp,prior", "--json", str(tmp_path / "a.json"),
                              "--plots", str(tmp_path / "fig"), "--report", str(tmp_path / "r.html"),
                              "--bootstrap", "20"], env={"COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    assert "prior" in out.stdout  # the table's column
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["models"][0]["scores"]["prior"]["state"]["bias"]
    figures = {p.name for p in (tmp_path / "fig").iterdir()}
    assert "a_rc.png" in figures and "a_reliability.png" in figures  # its probabilities: a reliability panel
    html = (tmp_path / "r.html").read_text()
    assert "AURC prior" in html and "prior: 20 errors" in html
    assert "<th>confidence (probability)</th>" in html
    board = runner.invoke(app, ["evaluate", str(a), str(b), "--scores", "msp,prior", "--csv", "-"])
    assert board.exit_code == 0, board.output
    header = board.stdout.splitlines()[0].split(",")
    assert "aurc_prior" in header
    assert header.index("aurc_prior") < header.index("best_posthoc")
    row = dict(zip(header, board.stdout.splitlines()[1].split(",")))
    assert row["best_posthoc"] == "prior"  # the only fitted score
    # check: a bound and a baseline on it, by name
    runner.invoke(app, ["evaluate", str(b), "--scores", "msp,prior", "--json", str(tmp_path / "b.json"),
                        "--bootstrap", "20", "-q"])
    checked = runner.invoke(app, ["check", str(tmp_path / "b.json"), "--baseline", str(tmp_path / "a.json"),
                                  "--metric", "prior.aurc", "--max", "prior.ece=1", "--json", "-",
                                  "--allow-other-data"])  # (a and b hold other rows: refused without it)
    report = json.loads(checked.stdout)
    assert {r["metric"] for r in report["rows"]} >= {"prior.aurc", "prior.ece"}
    compared = runner.invoke(app, ["compare", str(a), str(a), "--scores", "msp,prior", "--bootstrap", "50",
                                   "--json", "-", "--all"])  # (by default: accuracy, msp AURC and ECE)
    assert compared.exit_code == 0, compared.output
    rows = json.loads(compared.stdout)["rows"]
    assert any(r["metric"] == "prior.aurc" and r["difference"] == 0 for r in rows)


@pytest.mark.slow
def test_an_entry_point_adds_a_score_to_the_cli(tmp_path):
    package = tmp_path / "site"
    (package / "myscores").mkdir(parents=True)
    (package / "myscores" / "__init__.py").write_text(textwrap.dedent('''
        import numpy as np
        import selcal

        def register():
            selcal.register_score("half_max", score=lambda v, s: v.max(axis=1) * s["half"],
                                  fit=lambda v, y, o: {"half": 0.5}, description="half the max logit")
    '''))
    info = package / "myscores-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myscores\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[selcal.scores]\nhalf = myscores:register\n")
    dump = tmp_path / "m.parquet"
    write_dump(dump)
    code = ("import sys; from selcal.cli import app; "
            f"app(['evaluate', {str(dump)!r}, '--scores', 'msp,half_max', '--json', '-'])")
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), *sys.path])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)["models"][0]["scores"]
    assert scores["half_max"]["state"] == {"half": 0.5}
    assert math.isfinite(scores["half_max"]["aurc"])
