"""``selcal check`` and ``selcal compare``: the regression rule, the renderings, every exit status.

1. The rule on hand-made results: direction, tolerance, intervals, bounds.
2. Through the CLI (typer's CliRunner) on synthetic dumps: an identical baseline passes, a
   model made worse on purpose fails, a re-sampled copy of the same model does not fail;
   JSON, Markdown and JUnit outputs; exit status 2 for every kind of bad input.
3. ``compare``: paired differences on the same rows, aligned by id.
"""

from __future__ import annotations

import json
import math
import statistics
from xml.etree import ElementTree

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import model_interval_keys, write_dump
from typer.testing import CliRunner

import selcal
from selcal import checks
from selcal.bootstrap import add_intervals
from selcal.cli import app

N_TEST, N_VAL, K = 1500, 700, 5
RESAMPLES = "200"


# ----------------------------------------------------------------------------- helpers
def generate(n, seed, *, strength=2.0):
    """A known model: labels uniform over K, logit of the label raised by a Gamma margin."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, n)
    logits = rng.normal(0.0, 1.0, (n, K))
    logits[np.arange(n), labels] += rng.gamma(2.0, strength / 2, n)
    return logits.astype(np.float32), labels


def spoil_ranking(logits, seed):
    """Same predictions (so the same accuracy), but a top margin unrelated to correctness."""
    rng = np.random.default_rng(seed)
    out = logits.copy()
    rows = np.arange(len(out))
    pred = out.argmax(axis=1)
    others = out.copy()
    others[rows, pred] = -np.inf
    out[rows, pred] = others.max(axis=1) + rng.uniform(0.01, 4.0, len(out)).astype(np.float32)
    return out


def model_dump(path, seed=0, *, spoil=False, rows=None):
    """val rows then test rows, with a split column and ids; ``rows`` re-picks the test rows."""
    val_logits, val_labels = generate(N_VAL, 10_000 + seed)
    logits, labels = generate(N_TEST, seed)
    if spoil:
        logits = spoil_ranking(logits, seed)
    ids = np.array([f"test/{i:05d}" for i in range(N_TEST)])
    if rows is not None:
        logits, labels, ids = logits[rows], labels[rows], np.array([f"copy/{i:05d}" for i in range(len(rows))])
    return write_dump(
        path, np.concatenate([val_logits, logits]), np.concatenate([val_labels, labels]),
        split=["val"] * N_VAL + ["test"] * len(labels),
        ids=[f"val/{i:05d}" for i in range(N_VAL)] + list(ids),
    )


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def evaluate_json(tmp_path, dump, name, *extra):
    out = tmp_path / f"{name}.json"
    result = run("evaluate", dump, "--bootstrap", RESAMPLES, "--json", out, "-q", *extra)
    assert result.exit_code == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Dumps and bootstrapped results, made once for the module."""
    folder = tmp_path_factory.mktemp("checks")
    good = model_dump(folder / "good.parquet", seed=1)
    worse = model_dump(folder / "worse.parquet", seed=1, spoil=True)
    copy_rows = np.random.default_rng(5).integers(0, N_TEST, N_TEST)
    copy = model_dump(folder / "copy.parquet", seed=1, rows=copy_rows)
    return {
        "folder": folder, "good": good, "worse": worse, "copy": copy,
        "good.json": evaluate_json(folder, good, "good"),
        "worse.json": evaluate_json(folder, worse, "worse"),
        "copy.json": evaluate_json(folder, copy, "copy"),
    }


def result_dict(metrics: dict, ci: dict | None = None, *, n_eval=1000, name="m", bootstrap=True):
    """A minimal schema-1 result with one score ``msp`` holding ``metrics``."""
    scores = {"msp": dict(metrics)}
    if ci is not None:
        scores["msp"]["ci"] = ci
    out = {"schema": 1, "models": [{"name": name, "num_classes": 3, "n_eval": n_eval, "split": "split-column",
                                    "accuracy": 0.9, "error": 0.1, "scores": scores}]}
    if bootstrap:
        out["bootstrap"] = {"resamples": 100, "seed": 0, "confidence": 0.95, "refit": False}
    return out


def statuses(report):
    return {row.metric: row.status for row in report.rows}


# ====================================================================== 1. the rule
@pytest.mark.slow
def test_every_metric_of_the_json_has_a_direction_or_is_not_a_metric(files):
    data = json.loads(files["good.json"].read_text())
    model = data["models"][0]
    not_metrics = {"p", "fallback", "center", "objective", "val_objective", "val_objective_msp", "temperature",
                   "val_nll_before", "val_nll_after", "gradient", "temperature_fallback", "ci",
                   "smece_sigma"}  # smooth ECE's bandwidth: reported, never judged
    for name, metrics in model["scores"].items():
        for key in metrics:
            assert (checks.better(key) is not None) != (key in not_metrics), (name, key)
    assert {k for k in model if checks.better(k)} == {"accuracy", "error", "nll", "brier", "cece"}
    assert [checks.better(k) for k in ("aurc", "eaurc", "augrc", "ece", "aece", "mce", "nll", "brier", "risk@0.8",
                                       "fpr95", "error", "cece")] == ["lower"] * 12
    assert [checks.better(k) for k in ("cov@0.05", "auroc", "accuracy")] == ["higher"] * 3


def test_worse_by_more_than_the_tolerance_without_intervals_is_a_regression():
    base = result_dict({"aurc": 0.050, "auroc": 0.90}, bootstrap=False)
    cur = result_dict({"aurc": 0.052, "auroc": 0.91}, bootstrap=False)
    assert statuses(checks.check(cur, base)) == {"accuracy": "same", "msp.aurc": "REGRESSION"}  # the primary ones
    report = checks.check(cur, base, all_metrics=True)
    assert statuses(report) == {"accuracy": "same", "error": "same", "msp.aurc": "REGRESSION", "msp.auroc": "better"}
    assert report.exit_code == 1 and any("no bootstrap intervals" in n for n in report.notes)
    tolerant = checks.check(cur, base, tolerances=checks.parse_bounds(["aurc=0.002"], "--tolerance"))
    assert statuses(tolerant)["msp.aurc"] == "worse, within tolerance" and tolerant.exit_code == 0


def test_with_intervals_only_a_significant_worsening_is_a_regression():
    """p-values from the intervals (selcal.checks.gate), Holm over the tested metrics: with two tested,
    0.013 and 0.019 fail neither (0.013 > 0.025 / 2); 0.0013 and 0.0003 fail both."""
    base = result_dict({"aurc": 0.050, "auroc": 0.90}, {"aurc": [0.045, 0.055], "auroc": [0.88, 0.92]})
    overlap = result_dict({"aurc": 0.058, "auroc": 0.87}, {"aurc": [0.053, 0.063], "auroc": [0.85, 0.89]})
    apart = result_dict({"aurc": 0.062, "auroc": 0.85}, {"aurc": [0.056, 0.068], "auroc": [0.83, 0.87]})
    report = checks.check(overlap, base, all_metrics=True)
    assert statuses(report)["msp.aurc"] == statuses(report)["msp.auroc"] == "worse, within noise"
    rows = {r.metric: r for r in report.rows}
    normal = statistics.NormalDist()
    z = normal.inv_cdf(0.975)
    for key, worse, widths in (("msp.aurc", 0.008, (0.01, 0.01)), ("msp.auroc", 0.03, (0.04, 0.04))):
        se = math.sqrt(sum((w / (2 * z)) ** 2 for w in widths))
        assert rows[key].p_value == pytest.approx(1 - normal.cdf(worse / se), rel=1e-9)
    report = checks.check(apart, base, all_metrics=True)
    assert statuses(report)["msp.aurc"] == "REGRESSION" and statuses(report)["msp.auroc"] == "REGRESSION"
    # ... and it must also exceed the tolerance.
    tolerant = checks.check(apart, base, tolerances=checks.parse_bounds(["msp.aurc=0.02", "auroc=0.1"], "--tolerance"),
                            all_metrics=True)
    assert tolerant.exit_code == 0


def test_a_metric_without_interval_in_bootstrapped_files_is_judged_only_with_a_tolerance():
    base = result_dict({"aurc": 0.050}, {"aurc": [0.045, 0.055]})
    cur = result_dict({"aurc": 0.050}, {"aurc": [0.045, 0.055]})
    base["models"][0]["cece"], cur["models"][0]["cece"] = 0.010, 0.013  # class-wise ECE has no interval
    assert statuses(checks.check(cur, base, all_metrics=True))["cece"].startswith("worse, no interval")
    named = checks.check(cur, base, tolerances=checks.parse_bounds(["cece=0.001"], "--tolerance"))
    assert statuses(named)["cece"] == "REGRESSION"


def test_the_most_specific_tolerance_wins():
    base = result_dict({"aurc": 0.05, "ece": 0.02}, bootstrap=False)
    cur = result_dict({"aurc": 0.06, "ece": 0.03}, bootstrap=False)
    bounds = checks.parse_bounds(["*=0.1", "aurc=0.001", "m:msp.aurc=0.02"], "--tolerance")
    rows = {r.metric: r for r in checks.check(cur, base, tolerances=bounds).rows}
    assert rows["msp.aurc"].tolerance == 0.02 and rows["msp.aurc"].status == "worse, within tolerance"
    assert rows["msp.ece"].tolerance == 0.1


def test_bounds_on_the_current_value():
    cur = result_dict({"aurc": 0.05, "auroc": None})
    assert checks.check(cur, maxima=checks.parse_bounds(["msp.aurc=0.06"], "--max")).exit_code == 0
    assert checks.check(cur, maxima=checks.parse_bounds(["aurc=0.04"], "--max")).exit_code == 1
    assert checks.check(cur, minima=checks.parse_bounds(["accuracy=0.95"], "--min")).exit_code == 1
    undefined = checks.check(cur, minima=checks.parse_bounds(["msp.auroc=0.5"], "--min"))
    assert undefined.exit_code == 1 and undefined.rows[0].status.startswith("undefined")


# ================================================================ 2. check via the CLI
@pytest.mark.slow
def test_check_passes_on_an_identical_baseline(files, tmp_path):
    outputs = {"--json": tmp_path / "r.json", "--markdown": tmp_path / "r.md", "--junit": tmp_path / "r.xml"}
    result = run("check", files["good.json"], "--baseline", files["good.json"], "--all",
                 *[x for option, path in outputs.items() for x in (option, path)])
    assert result.exit_code == 0, result.stdout
    assert "PASS" in result.stdout
    report = json.loads(outputs["--json"].read_text())
    assert report["status"] == "pass" and report["failures"] == 0 and len(report["rows"]) > 50
    assert {row["status"] for row in report["rows"]} == {"same"}
    assert "✅" in outputs["--markdown"].read_text()
    suite = ElementTree.parse(outputs["--junit"]).getroot().find("testsuite")
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) == len(report["rows"])


@pytest.mark.slow
def test_check_fails_on_a_model_made_worse_on_purpose(files, tmp_path):
    md, xml = tmp_path / "r.md", tmp_path / "r.xml"
    result = run("check", files["worse.json"], "--baseline", files["good.json"], "--markdown", md, "--junit", xml,
                 "--json", "-", "--all")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    failed = {row["metric"] for row in report["rows"] if row["failed"]}
    assert {"msp.aurc", "msp.auroc", "max_logit.aurc", "temp.aurc"} <= failed
    assert not failed & {"accuracy", "error"}  # same predictions: accuracy did not move
    aurc = next(r for r in report["rows"] if r["metric"] == "msp.aurc")
    assert aurc["ci_value"][0] > aurc["ci_reference"][1]
    assert "**Failures**" in md.read_text() and "msp AURC" in md.read_text()  # the names of the tables
    suite = ElementTree.parse(xml).getroot().find("testsuite")
    failures = [case for case in suite.findall("testcase") if case.find("failure") is not None]
    assert int(suite.get("failures")) == len(failures) == len(failed)


@pytest.mark.slow
def test_check_does_not_fail_on_a_resampled_copy_within_its_interval(files):
    base = json.loads(files["good.json"].read_text())["models"][0]["scores"]["msp"]
    copy = json.loads(files["copy.json"].read_text())["models"][0]["scores"]["msp"]
    assert copy["aurc"] != base["aurc"]
    assert base["ci"]["aurc"][0] <= copy["aurc"] <= base["ci"]["aurc"][1]
    result = run("check", files["copy.json"], "--baseline", files["good.json"])
    assert result.exit_code == 2 and "other data" in result.stderr  # a resample is other rows
    result = run("check", files["copy.json"], "--baseline", files["good.json"], "--allow-other-data", "--all")
    assert result.exit_code == 0, result.stdout


@pytest.mark.slow
def test_fresh_samples_of_the_same_model_rarely_fail():
    """20 pairs of independent samples of one model: the rule fails few of them (measured: 2 of 30)."""
    def result(seed):
        logits, labels = generate(800, seed)
        val_logits, val_labels = generate(400, seed + 500)
        model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name="m")
        return json.loads(add_intervals(selcal.EvaluationResult([model], selcal.Options()), resamples=200).to_json())

    failing = sum(checks.check(result(2 * i + 1), result(2 * i), allow_other_data=True, all_metrics=True).exit_code
                  for i in range(20))
    assert failing <= 3


def test_check_bounds_through_the_cli(files):
    assert run("check", files["good.json"], "--max", "msp.aurc=0.5", "--min", "accuracy=0.5").exit_code == 0
    result = run("check", files["good.json"], "--max", "msp.aurc=0.0001")
    assert result.exit_code == 1 and "above max" in result.stdout


def test_check_metric_filter(files):
    result = run("check", files["worse.json"], "--baseline", files["good.json"], "--metric", "accuracy",
                 "--metric", "msp.ece", "--json", "-")
    rows = json.loads(result.stdout)["rows"]
    assert {r["metric"] for r in rows} == {"accuracy", "msp.ece"}


def _edit(path, target, change):
    data = json.loads(path.read_text())
    change(data)
    target.write_text(json.dumps(data))
    return target


@pytest.mark.parametrize("case", [
    "missing current", "missing baseline", "not json", "schema 2", "no models", "other data set",
    "other model", "missing metric", "other bins", "bad bound", "unknown metric", "nothing to check",
    "tolerance without baseline", "output folder missing",
])
def test_check_bad_input_exits_2(files, tmp_path, case):
    good = files["good.json"]
    bad = tmp_path / "bad.json"
    args = {
        "missing current": lambda: [tmp_path / "nope.json", "--baseline", good],
        "missing baseline": lambda: [good, "--baseline", tmp_path / "nope.json"],
        "not json": lambda: [bad.write_text("{not json") and bad, "--baseline", good],
        "schema 2": lambda: [_edit(good, bad, lambda d: d.update(schema=2)), "--baseline", good],
        "no models": lambda: [_edit(good, bad, lambda d: d.update(models=[])), "--baseline", good],
        "other data set": lambda: [_edit(good, bad, lambda d: d["models"][0].update(n_eval=99)), "--baseline", good],
        "other model": lambda: [_edit(good, bad, lambda d: d["models"].append(dict(d["models"][0], name="x"))
                                      or d["models"][0].update(name="y")), "--baseline", good],
        "missing metric": lambda: [_edit(good, bad, lambda d: d["models"][0]["scores"]["msp"].pop("cov@0.05")),
                                   "--baseline", good],
        "other bins": lambda: [_edit(good, bad, lambda d: d["options"].update(bins=10)), "--baseline", good],
        "bad bound": lambda: [good, "--max", "msp.aurc"],
        "unknown metric": lambda: [good, "--max", "msp.temperature=1"],
        "nothing to check": lambda: [good],
        "tolerance without baseline": lambda: [good, "--max", "aurc=1", "--tolerance", "aurc=0.1"],
        "output folder missing": lambda: [good, "--baseline", good, "--json", tmp_path / "no" / "r.json"],
    }[case]()
    result = run("check", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("selcal: error: ") and result.stderr.count("\n") == 1, result.stderr


# ============================================================================ 3. compare
@pytest.mark.slow
def test_compare_a_model_with_itself_finds_no_difference(files):
    result = run("compare", files["good"], files["good"], "--bootstrap", "100", "--json", "-")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert {row["difference"] for row in report["rows"]} == {0.0}
    assert {row["status"] for row in report["rows"]} <= {"no significant difference", "undefined"}


@pytest.mark.slow
def test_compare_answers_is_b_worse_with_a_number(files, tmp_path):
    xml = tmp_path / "c.xml"
    result = run("compare", files["good"], files["worse"], "--bootstrap", "200", "--json", "-", "--junit", xml)
    assert result.exit_code == 1
    rows = {row["metric"]: row for row in json.loads(result.stdout)["rows"]}
    aurc = rows["msp.aurc"]
    assert aurc["status"] == "WORSE" and aurc["difference"] == pytest.approx(aurc["value"] - aurc["reference"])
    assert 0 < aurc["ci_difference"][0] <= aurc["difference"] <= aurc["ci_difference"][1]
    assert rows["accuracy"]["difference"] == 0 and rows["accuracy"]["status"] == "no significant difference"
    assert ElementTree.parse(xml).getroot().find("testsuite").get("failures") != "0"
    # The other way round, B's AURC is better.
    reverse = run("compare", files["worse"], files["good"], "--bootstrap", "200", "--metric", "aurc", "--markdown", "-")
    assert reverse.exit_code == 0 and "better" in reverse.stdout and "msp AURC" in reverse.stdout


@pytest.mark.slow
def test_compare_aligns_rows_by_id(files, tmp_path):
    table = pq.read_table(files["worse"])
    order = np.random.default_rng(0).permutation(table.num_rows)
    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(table.take(pa.array(order)), shuffled)
    a = run("compare", files["good"], files["worse"], "--bootstrap", "50", "--json", "-")
    b = run("compare", files["good"], shuffled, "--bootstrap", "50", "--json", "-")
    rows_a, rows_b = json.loads(a.stdout)["rows"], json.loads(b.stdout)["rows"]
    for row_a, row_b in zip(rows_a, rows_b):
        assert row_a["metric"] == row_b["metric"] and row_a["difference"] == pytest.approx(row_b["difference"], abs=1e-15)
        assert row_a["ci_difference"] == pytest.approx(row_b["ci_difference"], abs=1e-12)


@pytest.mark.parametrize("case", ["missing file", "other ids", "other labels", "other length", "other K", "one val"])
def test_compare_refuses_different_data_sets(files, tmp_path, case):
    logits, labels = generate(N_TEST + N_VAL, 3)
    split = ["val"] * N_VAL + ["test"] * N_TEST
    ids = [f"val/{i:05d}" for i in range(N_VAL)] + [f"test/{i:05d}" for i in range(N_TEST)]
    good_labels = pq.read_table(files["good"]).column("label").to_numpy()
    other = tmp_path / "other.parquet"
    extra = []
    if case == "missing file":
        other = tmp_path / "nope.parquet"
    elif case == "other ids":
        write_dump(other, logits, good_labels, split=split, ids=[i.replace("test/", "t/") for i in ids])
    elif case == "other labels":
        write_dump(other, logits, labels, split=split, ids=ids)
    elif case == "other length":
        write_dump(other, logits[:-5], good_labels[:-5], split=split[:-5])
    elif case == "other K":
        write_dump(other, logits[:, :3], good_labels % 3, split=split, ids=ids)
    elif case == "one val":
        write_dump(other, logits, good_labels, split=split, ids=ids)
        extra = ["--val", files["good"]]
    result = run("compare", files["good"], other, "--bootstrap", "20", *extra)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("selcal: error: ") and result.stderr.count("\n") == 1, result.stderr


def test_compare_without_ids_needs_the_same_labels_in_the_same_order(tmp_path):
    logits, labels = generate(600, 8)
    a = write_dump(tmp_path / "a.parquet", logits, labels)
    b = write_dump(tmp_path / "b.parquet", spoil_ranking(logits, 1), labels)
    result = run("compare", a, b, "--scores", "msp,max_logit", "--bootstrap", "50", "--metric", "msp.aurc", "--json", "-")
    assert result.exit_code == 1 and json.loads(result.stdout)["rows"][0]["status"] == "WORSE"
    swapped = write_dump(tmp_path / "c.parquet", logits, np.roll(labels, 1))
    refused = run("compare", a, swapped, "--scores", "msp,max_logit", "--bootstrap", "50")
    assert refused.exit_code == 2 and "different data sets" in refused.stderr


# ====================================================================== evaluate --bootstrap
def test_evaluate_bootstrap_json(files):
    data = json.loads(files["good.json"].read_text())
    assert data["schema"] == 1
    assert data["bootstrap"] == {"resamples": int(RESAMPLES), "seed": 0, "confidence": 0.95, "refit": False}
    model = data["models"][0]
    assert set(model["ci"]) == model_interval_keys()
    for name in ("msp", "max_logit", "pnorm", "temp"):
        assert "aurc" in model["scores"][name]["ci"]


@pytest.mark.slow
def test_evaluate_bootstrap_refit_and_table(tmp_path):
    dump = model_dump(tmp_path / "small.parquet", seed=4)
    result = run("evaluate", dump, "--bootstrap", "10", "--bootstrap-refit", "--confidence", "0.9", "--json", "-")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["bootstrap"]["refit"] is True and data["bootstrap"]["confidence"] == 0.9
    assert "temperature" in data["models"][0]["scores"]["temp"]["ci"]
    table = run("evaluate", dump, "--bootstrap", "20", "--scores", "msp,max_logit")
    assert table.exit_code == 0 and "95% bootstrap intervals" in table.stdout


@pytest.mark.parametrize("args", [["--bootstrap", "1"], ["--bootstrap", "100", "--confidence", "1.5"]])
def test_evaluate_bad_bootstrap_options_exit_2(files, tmp_path, args):
    result = run("evaluate", files["good"], *args, "--json", tmp_path / "x.json")
    assert result.exit_code == 2 and result.stderr.startswith("selcal: error: ")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_compare_uses_one_hold_out_for_both_models(tmp_path):
    """Without a split column, A's seeded hold-out is applied to B's rows (matched by id)."""
    logits, labels = generate(1200, 12)
    ids = [f"r{i}" for i in range(1200)]
    order = np.random.default_rng(1).permutation(1200)
    a = write_dump(tmp_path / "a.parquet", logits, labels, ids=ids)
    b = write_dump(tmp_path / "b.parquet", spoil_ranking(logits, 2)[order], labels[order], ids=np.array(ids)[order])
    result = run("compare", a, b, "--bootstrap", "100", "--metric", "msp.aurc", "--json", "-")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["rows"][0]["status"] == "WORSE"
    assert any("hold-out" in note for note in report["notes"])


@pytest.mark.slow
def test_check_refuses_nan_and_infinity_metric_values(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path
    result = selcal.evaluate_arrays(np.random.default_rng(0).normal(size=(300, 3)),
                                    np.random.default_rng(1).integers(0, 3, 300), scores="msp")
    base = tmp_path / "base.json"
    base.write_text(result.to_json())
    for bad in (float("nan"), float("inf")):
        data = json.loads(result.to_json())
        data["models"][0]["scores"]["msp"]["aurc"] = bad
        current = tmp_path / "current.json"
        current.write_text(json.dumps(data))  # writes NaN / Infinity, which json.load accepts
        selcal_cli = str(Path(sys.executable).with_name("selcal"))
        run = subprocess.run([selcal_cli, "check", str(current), "--baseline", str(base),
                              "--metric", "msp.aurc"], capture_output=True, text=True)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "is not a number or null" in run.stderr and "Traceback" not in run.stderr
