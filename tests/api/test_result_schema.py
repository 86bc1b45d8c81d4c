"""The published JSON Schema of the results (selcal/schema/result-1.json): every golden results JSON
follows it, results of every kind the API makes follow it, it refuses what breaks the contract, and
it names every metric of the catalog (so that a new metric cannot be left out of it)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import make_data, result_schema_errors

import selcal
from selcal.metrics import catalog
from selcal.results import json_schema

jsonschema = pytest.importorskip("jsonschema")

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "expected"


def golden_results() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("*.json") if json.loads(p.read_text()).get("schema") == 1)


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_every_golden_results_json_follows_the_schema():
    paths = golden_results()
    assert len(paths) >= 20  # evaluate, bootstrap, segmentation, streaming, calibrators, leaderboard
    for path in paths:
        assert result_schema_errors(json.loads(path.read_text())) == [], path.name


def test_results_of_every_kind_follow_the_schema(tmp_path):
    logits, labels = make_data(n=300, k=4, seed=3)
    groups = np.where(np.arange(300) % 3 == 0, "a", "b")
    kinds = [
        selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp", groups=groups),
        selcal.evaluate_arrays(logits, labels, scores="msp", bootstrap=20),
        selcal.evaluate_arrays(np.exp(logits) / np.exp(logits).sum(1, keepdims=True), labels, scores="msp"),
        selcal.evaluate_arrays(logits, np.where(labels == 3, 9, labels), scores="msp", ood_label=9),
        selcal.evaluate_arrays(logits[:, 0], labels % 2, scores="msp"),
    ]
    for result in kinds:
        assert result_schema_errors(json.loads(result.to_json())) == []


BREAKS = {
    "a metric as text": lambda d: d["models"][0]["scores"]["msp"].__setitem__("aurc", "0.1"),
    "a missing model key": lambda d: d["models"][0].pop("n_eval"),
    "a fraction above 1": lambda d: d["models"][0].__setitem__("accuracy", 1.5),
    "another schema number": lambda d: d.__setitem__("schema", 2),
    "no models": lambda d: d.__setitem__("models", []),
    "an interval of three numbers": lambda d: d["models"][0]["scores"]["msp"].__setitem__("ci", {"aurc": [0, 1, 2]}),
    "a score without its selective metrics": lambda d: d["models"][0]["scores"]["msp"].pop("auroc"),
    "a cov@ as text": lambda d: d["models"][0]["scores"]["msp"].__setitem__("cov@0.01", "all"),
}


@pytest.mark.parametrize("change", BREAKS.values(), ids=BREAKS.keys())
def test_the_schema_refuses_what_breaks_the_contract(change):
    document = json.loads((GOLDEN / "eval_markus93_densenet40_c10.json").read_text())
    broken = copy.deepcopy(document)
    change(broken)
    assert result_schema_errors(document) == [] and result_schema_errors(broken) != []


def test_the_schema_names_every_metric_of_the_catalog():
    schema = json_schema()["$defs"]
    named = set(schema["score"]["properties"]) | set(schema["selective"]["properties"])
    patterns = set(schema["selective"]["patternProperties"])
    for key, metric in catalog.CATALOG.items():
        if metric.family:
            assert f"^{key}" in patterns, key
            continue
        if "score" in metric.levels:
            assert key in named, key
        if "model" in metric.levels:
            assert key in schema["model"]["properties"], key


def test_a_results_json_that_breaks_the_schema_fails_the_test_that_writes_it():
    result = selcal.evaluate_arrays(*make_data(n=50, k=3), scores="msp")
    result.models[0].n_eval = -1
    with pytest.raises(AssertionError, match="n_eval"):
        result.to_json()


@pytest.mark.slow
def test_a_results_json_a_subprocess_writes_is_checked_too(tmp_path):
    import subprocess
    import sys

    good = tmp_path / "good.json"
    done = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(GOLDEN.parents[2] / "sample_logits" /
                           "markus93_densenet40_c10.parquet"), "--scores", "msp", "--json", str(good), "--quiet"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and result_schema_errors(json.loads(good.read_text())) == []
    printed = "import json; print(json.dumps({'schema': 1, 'selcal': 'x', 'models': []}))"  # as `--json -` would
    with pytest.raises(AssertionError, match="breaks selcal/schema/result-1.json: models"):
        subprocess.run([sys.executable, "-c", printed, "selcal", "--json", "-"], capture_output=True, text=True)
