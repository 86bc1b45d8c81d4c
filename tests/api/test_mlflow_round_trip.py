"""A result logged into a real MLflow tracking store (SQLite, started by the test in tmp_path), then read
back: every metric under its flat name with the JSON's value, the options as params, the JSON, the
figures and the HTML report as artifacts; from Python (``selcal.log_to_mlflow``) and from the command
line (``selcal evaluate --mlflow``). Skipped without mlflow (CI installs it: .ci/run)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import make_data

import selcal
from selcal.cli import app
from selcal.writers.flat import flat_metrics
from selcal.writers.trackers import run_params

if os.environ.get("SELCAL_REQUIRE_MLFLOW"):
    import mlflow
else:
    mlflow = pytest.importorskip("mlflow")

SAMPLE = Path(__file__).resolve().parents[2] / "sample_logits" / "calibrator_cifar10_resnet50_ce.parquet"


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """A fresh SQLite tracking store, made once for this module (making its tables takes seconds),
    chosen the way a user chooses one: the environment."""
    folder = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.chdir(folder)  # the artifacts beside the store (./mlartifacts)
        yield uri


@pytest.fixture
def store(tracking, request, monkeypatch):
    """The store, with an experiment of this test's own."""
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", request.node.name)
    assert mlflow.get_tracking_uri() == tracking
    return mlflow.MlflowClient(tracking)


def read_back(client, run_id, tmp_path):
    run = client.get_run(run_id)
    folder = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="selcal",
                                                      dst_path=str(tmp_path / "back")))
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    return run, folder, files


@pytest.mark.slow
def test_every_metric_param_and_artifact_reads_back_from_the_store(store, tmp_path):
    logits, labels = make_data(n=300, k=4, seed=31)
    result = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp", bootstrap=10, name="net")
    run_id = selcal.log_to_mlflow(result)
    run, folder, files = read_back(store, run_id, tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.metrics == flat_metrics(result)  # every metric, its interval's bounds, the same bits
    assert run.data.metrics["msp/cov_at_risk_0.01"] == result.scores["msp"]["cov@0.01"]
    assert run.data.params == run_params(result)
    assert run.data.params["selcal.scores"] == "msp,max_logit,temp"
    assert json.loads((folder / "result.json").read_text()) == json.loads(result.to_json())
    figures = [f for f in files if f.startswith("figures/")]
    assert {"figures/net_rc.png", "figures/net_reliability.png"} <= set(figures)
    assert all((folder / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figures)
    page = (folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "net" in page


@pytest.mark.slow
def test_the_active_run_is_logged_into_and_left_open(store, tmp_path):
    logits, labels = make_data(n=120, k=3, seed=32)
    result = selcal.evaluate_arrays(logits, labels, scores="msp")
    with mlflow.start_run() as active:
        mlflow.log_param("lr", "0.1")  # the training run's own
        assert selcal.log_to_mlflow(result, figures=False, report=False, prefix="selcal/") == active.info.run_id
        assert mlflow.active_run().info.run_id == active.info.run_id
    run, _, files = read_back(store, active.info.run_id, tmp_path)
    assert run.data.params["lr"] == "0.1" and run.data.metrics["selcal/msp/aurc"] == result.scores["msp"]["aurc"]
    assert files == ["result.json"]


@pytest.mark.slow
def test_the_command_line_logs_the_same_names(store, tmp_path):
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, ["evaluate", str(SAMPLE), "--scores", "msp,max_logit", "--mlflow", "--figures", "rc",
                                   "--plot-format", "svg", "--json", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    experiment = store.get_experiment_by_name("test_the_command_line_logs_the_same_names")
    (run,) = store.search_runs([experiment.experiment_id])
    document = json.loads((tmp_path / "r.json").read_text())
    assert run.data.metrics == flat_metrics(document)
    assert run.info.run_id in out.output
    _, _, files = read_back(store, run.info.run_id, tmp_path)
    assert files == ["figures/calibrator_cifar10_resnet50_ce_rc.svg", "report.html", "result.json"]  # --figures rc


def test_without_mlflow_the_flag_is_refused_before_any_work(monkeypatch):
    from typer.testing import CliRunner

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if it were not installed
    out = CliRunner().invoke(app, ["evaluate", str(SAMPLE), "--mlflow"])
    assert out.exit_code == 2
    assert "--mlflow needs the mlflow package: pip install 'selcal[mlflow]'" in out.output
    assert "Traceback" not in out.output
