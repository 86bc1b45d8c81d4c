"""What selcal knows reaches the user, and the command line reads well in a terminal and in a CI log.

1. Warnings about the data: stderr always (``-q``, ``--json -``, leaderboard, check, compare), one
   line each, silenced only by ``--no-warnings``; in check's Markdown and JUnit.
2. Help: tests/cli/test_help_panels.py.
3. Tables: nothing said about scores that were not evaluated, lines not cut at 80 columns in a
   pipe, one set of metric names (report.METRIC_NAMES) in every table.
4. The leaderboard's ``p`` column says when pnorm fell back to MSP (terminal, CSV, Markdown).
5. JUnit read back with a JUnit parser: dotted model names, skipped rows with their reason.
6. ``check`` shows the failed and close rows by default (``--all``: every row), in 100 columns.
7. Hostile check input: deep JSON, metrics that are not numbers.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from helpers import make_data, write_parquet

import selcal
from selcal import checks
from selcal.report import (
    METRIC_NAMES,
    leaderboard,
    leaderboard_csv,
    leaderboard_markdown,
    metric_label,
    render_leaderboard,
)

WARNING_LINE = re.compile(r"^selcal: warning: [^:]+: .+$")


def _small(dumps, name="small.npz", seed=3):
    """A dump of 60 rows: the evaluation and validation rows are too few, two warnings."""
    logits, labels = make_data(n=60, seed=seed)
    return dumps.npz(name, logits, labels)


def _stderr_warnings(result) -> list[str]:
    lines = result.stderr.splitlines()
    return [line for line in lines if line.startswith("selcal: warning:")]


# ================================================================ 1. warnings reach the user
@pytest.mark.parametrize("extra", [[], ["-q"], ["--json", "-"], ["--csv", "-"]])
def test_warnings_go_to_stderr_whatever_the_output(cli, dumps, extra):
    path = _small(dumps)
    expected = selcal.evaluate(str(path)).models[0].warnings
    assert expected, "the small dump must have warnings"
    result = cli("evaluate", path, *extra)
    assert result.exit_code == 0, result.stderr
    warnings = _stderr_warnings(result)
    assert warnings == [f"selcal: warning: small: {w}" for w in expected]
    assert all(WARNING_LINE.match(line) for line in warnings)
    assert "selcal: warning" not in result.stdout
    if extra != ["--json", "-"]:
        assert "only 48 evaluation rows" not in result.stdout
    else:
        assert json.loads(result.stdout)["models"][0]["warnings"] == expected


def test_no_warnings_silences_them_but_the_json_keeps_them(cli, dumps):
    path = _small(dumps)
    result = cli("evaluate", path, "--json", "-", "--no-warnings")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["models"][0]["warnings"]


def test_the_leaderboard_marks_the_models_with_warnings_and_lists_them(cli, dumps):
    logits, labels = make_data(n=600, seed=4)
    clean = dumps.npz("clean.npz", logits, labels)
    small = _small(dumps)
    result = cli("evaluate", clean, small, "--scores", "msp,max_logit")  # (no validation rows: clean has no warning)
    assert result.exit_code == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith(("clean", "small"))}
    assert "(!)" in rows["small"] and "(!)" not in rows["clean"]
    assert "(!): the model has warnings" in " ".join(result.stdout.split())  # (the note is wrapped)
    model_lines = [line for line in _stderr_warnings(result) if "not evaluated on the same rows" not in line]
    assert model_lines and all(" small: " in line for line in model_lines)
    assert len(_stderr_warnings(result)) == len(model_lines)  # the two files hold other rows: a board each
    assert result.stdout.startswith("the models were split into 2 boards: they were not all evaluated on the same")
    markdown = cli("evaluate", clean, small, "--scores", "msp,max_logit", "--markdown", "-", "--no-warnings")
    assert markdown.stderr == ""
    assert "small (!)" in markdown.stdout and "**Warnings**" in markdown.stdout and "- small: only" in markdown.stdout


def test_check_shows_and_writes_the_current_files_warnings(cli, dumps, tmp_path):
    current = tmp_path / "current.json"
    assert cli("evaluate", _small(dumps), "--json", current, "-q", "--no-warnings").exit_code == 0
    expected = json.loads(current.read_text())["models"][0]["warnings"]
    md, xml = tmp_path / "r.md", tmp_path / "r.xml"
    result = cli("check", current, "--baseline", current, "--markdown", md, "--junit", xml)
    assert result.exit_code == 0, result.stderr
    assert _stderr_warnings(result) == [f"selcal: warning: small: {w}" for w in expected]
    assert "Warnings about the data" in md.read_text() and "only 48 evaluation rows" in md.read_text()
    JUnitXml = pytest.importorskip("junitparser").JUnitXml  # in the test extra

    suite = next(iter(JUnitXml.fromfile(str(xml))))
    assert [p.value for p in suite.properties() if p.name == "warning"] == [f"small: {w}" for w in expected]
    from xml.etree import ElementTree

    assert "only 48 evaluation rows" in ElementTree.parse(xml).getroot().find("testsuite").find("system-err").text
    quiet = cli("check", current, "--baseline", current, "-q", "--no-warnings", "--markdown", md)
    assert quiet.stderr == "" and "Warnings about the data" in md.read_text()


def test_compare_shows_the_warnings_of_both_models(cli, dumps):
    logits, labels = make_data(n=400, seed=6)
    log_probabilities = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # a warning from the data
    a, b = dumps.npz("a.npz", log_probabilities, labels), dumps.npz("b.npz", log_probabilities, labels)
    result = cli("compare", a, b, "--bootstrap", "50", "-q")
    assert result.exit_code == 0, result.stderr
    names = {line.split(": ")[2] for line in _stderr_warnings(result)}
    assert names == {"a and b"}  # one warning of one kind about both: one line naming both (issue 34)


# ============================================================================= 2. help
# (tests/cli/test_help_panels.py)


# =================================================================== 3. tables and names
def _split_dump(dumps, name="split.parquet"):
    logits, labels = make_data(n=400, seed=5)
    split = np.where(np.arange(400) % 4 == 0, "val", "test")
    return dumps.parquet(name, logits, labels, split=split)


@pytest.mark.parametrize("scores, fitted", [("msp,max_logit", None), ("msp,temp", "temp"),
                                            ("msp,max_logit,pnorm,temp", "pnorm and temp")])
def test_the_table_speaks_only_of_the_scores_evaluated(cli, dumps, scores, fitted):
    result = cli("evaluate", _split_dump(dumps), "--scores", scores)
    assert result.exit_code == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "evaluated on" in line)
    if fitted is None:
        assert line == "  evaluated on 300 rows" and "pnorm" not in result.stdout and "temp" not in result.stdout
    else:  # one whole line, even in a pipe of 80 columns
        assert line == f"  evaluated on 300 rows; {fitted} fitted on 100 rows, the 'val' rows of the split column"


def test_notes_are_not_wrapped_at_80_columns_in_a_pipe(cli, dumps):
    result = cli("evaluate", _split_dump(dumps), "--bootstrap", "20", env={"COLUMNS": "80"})
    lines = result.stdout.splitlines()
    pnorm = next(line for line in lines if line.startswith("  pnorm: p = "))
    assert pnorm.endswith(")") or pnorm.endswith("validation")  # the whole note on one line
    model_ci = next(line for line in lines if line.startswith("  model: accuracy (%)"))
    assert "error (%)" in model_ci  # (NLL and Brier are in msp's column since issue 34)


def _first_column(text: str, after: str) -> list[str]:
    block = text.split(after, 1)[1]
    labels = []
    for line in block.splitlines()[1:]:
        if not re.search(r"[A-Za-z]", line):  # a rule between the header and the rows
            continue
        if "│" not in line and "┃" not in line:
            if labels:
                break
            continue
        labels.append(line.split("│")[0].split("┃")[0].strip())
    return [label for label in labels if label and label != "metric" and not set(label) <= set("━─")]


@pytest.mark.slow
def test_one_set_of_metric_names_in_the_table_the_intervals_and_check(cli, dumps, tmp_path):
    out = tmp_path / "r.json"
    result = cli("evaluate", _split_dump(dumps), "--bootstrap", "20", "--json", out)
    assert result.exit_code == 0, result.stderr
    main = _first_column(result.stdout, "K = 4")
    intervals = _first_column(result.stdout, "bootstrap intervals")
    assert "AURC (%)" in main and "cov@risk 1% (%)" in main and "NLL" in main
    assert set(intervals) <= set(main), set(intervals) - set(main)
    report = cli("check", out, "--baseline", out, "--all", env={"COLUMNS": "200"})
    names = {line.split("│")[0].strip() for line in report.stdout.splitlines() if "│" in line}
    for key in ("aurc", "cov@0.01", "ece", "aece"):  # the evaluate table's names and units, the score in front
        assert f"msp {metric_label(key)}" in names
        assert metric_label(key) in main
    assert "msp AURC (%)" in names and "accuracy (%)" in names and "NLL" in names and "NLL" in main
    assert "msp.aurc" not in report.stdout
    assert set(METRIC_NAMES) >= {"aurc", "eaurc", "augrc", "auroc", "fpr95", "ece", "aece", "mce", "nll", "brier"}


# ================================================================= 4. pnorm fell back to MSP
@pytest.fixture(scope="module")
def fallback_result():
    models = []
    for i in range(2):
        logits, labels = make_data(n=800, seed=10 + i)
        val_logits, val_labels = make_data(n=300, seed=20 + i)
        models.append(selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name=f"m{i}"))
    models[0].scores["pnorm"]["fallback"] = True
    models[1].scores["pnorm"]["fallback"] = False
    return selcal.EvaluationResult(models=models, options=selcal.Options())


def test_the_p_column_says_when_pnorm_fell_back(fallback_result):
    from rich.console import Console

    rows = leaderboard(fallback_result, "model")
    p0, p1 = (fallback_result.models[i].scores["pnorm"]["p"] for i in range(2))
    console = Console(width=160, record=True, file=io.StringIO())
    render_leaderboard(rows, console)
    text = console.export_text()
    assert re.search(rf"^m0 .*│ +{p0} \(fb\) │", text, re.M) and not re.search(r"^m1 .*\(fb\)", text, re.M)
    assert "p (fb): pnorm fell back to MSP" in " ".join(text.split())  # (the note is wrapped at word boundaries)
    markdown = leaderboard_markdown(rows)
    assert f"| {p0} (fb) |" in markdown and f"| {p1} |" in markdown
    parsed = {r["model"]: r for r in csv.DictReader(io.StringIO(leaderboard_csv(rows)))}
    assert parsed["m0"]["pnorm_fallback"] == "true" and parsed["m1"]["pnorm_fallback"] == "false"
    assert int(parsed["m0"]["p"]) == p0  # p stays a number
    assert list(parsed["m0"]).index("pnorm_fallback") == list(parsed["m0"]).index("p") + 1


# ====================================================================== 5. JUnit read back
def _result(name, metrics, ci=None, *, bootstrap=True, warnings=()):
    metrics = dict(metrics)
    cece = metrics.pop("cece", None)
    scores = {"msp": dict(metrics)}
    if ci is not None:
        scores["msp"]["ci"] = ci
    out = {"schema": 1, "models": [{"name": name, "num_classes": 3, "n_eval": 1000, "split": "split-column",
                                    "accuracy": 0.9, "error": 0.1, "cece": cece,
                                    "scores": scores, "warnings": list(warnings)}]}
    if bootstrap:
        out["bootstrap"] = {"resamples": 100, "seed": 0, "confidence": 0.95, "refit": False}
    return out


def test_junit_survives_dotted_model_names_and_skips_what_it_cannot_judge():
    junitparser = pytest.importorskip("junitparser")  # in the test extra
    Failure, JUnitXml, Skipped = junitparser.Failure, junitparser.JUnitXml, junitparser.Skipped

    base = _result("lspair_alpha0.1", {"aurc": 0.05, "auroc": 0.9, "cece": 0.010},
                   {"aurc": [0.04, 0.06], "auroc": [0.88, 0.92]})
    cur = _result("lspair_alpha0.1", {"aurc": 0.08, "auroc": None, "cece": 0.013},
                  {"aurc": [0.07, 0.09], "auroc": None}, warnings=["only 57 evaluation rows"])
    report = checks.check(cur, base, all_metrics=True)
    xml = JUnitXml.fromstring(report.to_junit())
    suites = list(xml) if not hasattr(xml, "classname") else [xml]
    cases = {case.name: case for suite in suites for case in suite}
    assert set(cases) == {"accuracy (model lspair_alpha0.1)", "error (model lspair_alpha0.1)",
                          "cece (model lspair_alpha0.1)", "msp.aurc (model lspair_alpha0.1)",
                          "msp.auroc (model lspair_alpha0.1)"}
    for case in cases.values():
        assert case.classname == "selcal.check.lspair_alpha0_1"  # one package 'selcal.check', one class
    aurc, cece, auroc = (cases[f"{k} (model lspair_alpha0.1)"] for k in ("msp.aurc", "cece", "msp.auroc"))
    assert isinstance(aurc.result[0], Failure)
    assert cece.is_skipped and isinstance(cece.result[0], Skipped) and "no interval" in cece.result[0].message
    assert auroc.is_skipped and "undefined" in auroc.result[0].message
    assert cases["accuracy (model lspair_alpha0.1)"].is_passed
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.skipped, suite.errors) == (5, 1, 2, 0)


def test_junit_of_compare_has_dot_free_class_names(cli, dumps, tmp_path):
    JUnitXml = pytest.importorskip("junitparser").JUnitXml  # in the test extra

    logits, labels = make_data(n=400, seed=6)
    a, b = dumps.npz("m.v1.npz", logits, labels), dumps.npz("m.v2.npz", logits, labels)
    xml = tmp_path / "c.xml"
    result = cli("compare", a, b, "--bootstrap", "30", "--junit", xml, "-q", "--metric", "aurc")
    assert result.exit_code == 0, result.stderr
    cases = [case for suite in JUnitXml.fromfile(str(xml)) for case in suite]
    assert cases and all(case.classname.count(".") == 2 for case in cases)
    assert all(case.name.endswith("(model m.v1 -> m.v2)") for case in cases)


# ===================================================================== 6. check's terminal
def test_is_close_by_hand():
    row = checks.Row
    # bounds: within 10% of |bound|
    assert checks.is_close(row("m", "msp.aurc", "lower", "max", 0.10, 0.0905))
    assert not checks.is_close(row("m", "msp.aurc", "lower", "max", 0.10, 0.0895))
    assert checks.is_close(row("m", "accuracy", "higher", "min", 0.80, 0.879))
    assert not checks.is_close(row("m", "accuracy", "higher", "min", 0.80, 0.881))
    # baseline, no intervals: worse by more than 90% of the tolerance
    assert checks.is_close(row("m", "msp.aurc", "lower", "baseline", 0.05, 0.0595, tolerance=0.01))
    assert not checks.is_close(row("m", "msp.aurc", "lower", "baseline", 0.05, 0.0585, tolerance=0.01))
    assert not checks.is_close(row("m", "msp.aurc", "lower", "baseline", 0.05, 0.05, tolerance=0.0))
    # baseline with intervals: overlap at most 10% of the current interval's width
    close = row("m", "msp.aurc", "lower", "baseline", 0.05, 0.07, ci_reference=[0.04, 0.06],
                ci_value=[0.059, 0.081])
    far = row("m", "msp.aurc", "lower", "baseline", 0.05, 0.07, ci_reference=[0.04, 0.06], ci_value=[0.05, 0.09])
    assert checks.is_close(close) and not checks.is_close(far)
    # compare: the interval of B - A barely reaches the better side of 0
    assert checks.is_close(row("a -> b", "msp.auroc", "higher", "compare", 0.9, 0.89, ci_difference=[-0.02, 0.001]))
    assert not checks.is_close(row("a -> b", "msp.auroc", "higher", "compare", 0.9, 0.89,
                                   ci_difference=[-0.02, 0.01]))
    # a failed row is not "close"
    assert not checks.is_close(row("m", "msp.aurc", "lower", "max", 0.10, 0.2, failed=True))


def test_check_shows_failed_and_close_rows_by_default_and_all_with_all(cli, tmp_path):
    base = _result("m", {"aurc": 0.05, "auroc": 0.90, "ece": 0.03}, bootstrap=False)
    cur = _result("m", {"aurc": 0.06, "auroc": 0.9001, "ece": 0.0309}, bootstrap=False)
    b, c = tmp_path / "b.json", tmp_path / "c.json"
    b.write_text(json.dumps(base))
    c.write_text(json.dumps(cur))
    args = ["check", c, "--baseline", b, "--tolerance", "aurc=0.005", "--tolerance", "ece=0.001"]
    result = cli(*args)
    assert result.exit_code == 1
    shown = {line.split("│")[0].strip() for line in result.stdout.splitlines() if "│" in line}
    assert shown == {"accuracy (%)", "msp AURC (%)", "msp ECE (%)"}  # the primary metrics, all shown (few)
    assert "(close)" in result.stdout  # ECE: 0.0009 of a tolerance of 0.001
    markdown = cli(*args, "--markdown", "-").stdout
    close = markdown[markdown.index("**Close**"):markdown.index("<details>")]
    assert "msp ECE" in close and "msp AURC" not in close
    every = cli(*args, "--all")
    shown = {line.split("│")[0].strip() for line in every.stdout.splitlines() if "│" in line}
    assert shown == {"msp AURC (%)", "msp ECE (%)", "msp AUROC (%)", "accuracy (%)", "error (%)",
                     "class-wise ECE (%)"}
    assert "--all shows" not in every.stdout and "shown:" not in every.stdout


@pytest.mark.slow
def test_check_tables_fit_100_columns(cli, dumps, tmp_path):
    out = tmp_path / "r.json"
    assert cli("evaluate", _split_dump(dumps), "--bootstrap", "20", "--json", out, "-q").exit_code == 0
    for extra in ([], ["--all"], ["--max", "msp.aurc=0.5"]):
        result = cli("check", out, "--baseline", out, *extra)
        table = [line for line in result.stdout.splitlines() if set(line) & set("│┃━")]
        assert table or "no metric failed or came close" in result.stdout
        assert all(len(line) <= 100 for line in table), max(map(len, table))


# ===================================================================== 7. hostile check input
def test_check_refuses_json_nested_100000_levels_in_one_line(cli, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    result = cli("check", path, "--max", "aurc=1")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"selcal: error: {path}: JSON nested too deeply")


@pytest.mark.parametrize("where, value", [("score", "low"), ("score", True), ("score", [0.1]), ("model", "0.9"),
                                          ("model", {"x": 1})])
def test_check_refuses_a_metric_that_is_not_a_number_or_null(cli, tmp_path, where, value):
    data = _result("resnet", {"aurc": 0.05, "auroc": 0.9})
    if where == "score":
        data["models"][0]["scores"]["msp"]["aurc"] = value
        key = "scores.msp.aurc"
    else:
        data["models"][0]["accuracy"] = value
        key = "accuracy"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = cli("check", path, "--max", "aurc=1")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"selcal: error: {path}: model 'resnet', key '{key}': ")
    assert "not a number or null" in result.stderr


# ============================================================= 8. options without an effect
NOTE = "selcal: note: ignored, no effect with these inputs: "


def _notes(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("selcal: note:")]


def test_options_without_effect_are_named_in_one_note_line(cli, dumps):
    path = _split_dump(dumps)
    result = cli("evaluate", path, "-q", "--scores", "msp,max_logit", "--at-coverage", "0.2", "--ls-alpha", "0.1",
                 "--confidence", "0.9", "--bootstrap-refit", "--sort-by", "accuracy", "--p-grid", "1-3",
                 "--no-center", "--pnorm-objective", "augrc", "--temp-objective", "aurc", "--val-fraction", "0.3",
                 "--plot-format", "svg", "--details", "--pixels-per-image", "100", "--rank-maps", "2",
                 "--rank-maps-of", "a,b", "--errors-top", "5")
    assert result.exit_code == 0, result.stderr
    notes = _notes(result)
    assert len(notes) == 1 and notes[0].startswith(NOTE)
    named = re.findall(r"(--[a-z-]+(?:/--[a-z-]+)?) \(", notes[0])
    assert named == ["--pixels-per-image", "--rank-maps", "--rank-maps-of", "--errors-top", "--at-coverage", "--ls-alpha", "--plot-format", "--bootstrap-refit", "--confidence", "--sort-by",
                     "--details", "--p-grid", "--center/--no-center", "--pnorm-objective", "--temp-objective",
                     "--val-fraction"]


def test_defaults_and_options_in_use_give_no_note(cli, dumps, tmp_path):
    path = _split_dump(dumps)
    logits, labels = make_data(n=400, seed=7)
    holdout = dumps.npz("holdout.npz", logits, labels)
    assert _notes(cli("evaluate", path, "-q")) == []
    used = cli("evaluate", holdout, path, "-q", "--bootstrap", "20", "--confidence", "0.9", "--sort-by", "accuracy",
               "--p-grid", "1-3", "--val-fraction", "0.3", "--temp-objective", "aurc")
    assert used.exit_code == 0 and _notes(used) == [], used.stderr
    # --at-coverage with --group-col but no figure asked for is still named
    grouped = cli("evaluate", path, "-q", "--at-coverage", "0.2", "--group-col", "label")
    assert any("--at-coverage" in n for n in _notes(grouped)), grouped.stderr


def test_check_and_compare_name_their_ignored_options(cli, tmp_path, dumps):
    current = tmp_path / "c.json"
    current.write_text(json.dumps(_result("m", {"aurc": 0.05, "auroc": 0.9})))
    result = cli("check", current, "--max", "aurc=1", "--metric", "aurc", "--all", "-q")
    assert result.exit_code == 0
    assert _notes(result) == [NOTE + "--metric (it restricts the comparison with --baseline)"]
    logits, labels = make_data(n=300, seed=8)
    a = dumps.npz("a.npz", logits, labels)
    compared = cli("compare", a, a, "--bootstrap", "20", "--all", "--json", "-")
    assert _notes(compared) == []  # --all judges every metric, whether a table is shown or not


# ======================================================================== 9. progress bars
def test_bootstrap_progress_reaches_every_resample():
    from selcal.bootstrap import add_intervals

    models = []
    for i in range(2):
        logits, labels = make_data(n=300, seed=30 + i)
        models.append(selcal.evaluate_arrays(logits, labels, logits[:100], labels[:100], name=f"m{i}"))
    calls = []
    add_intervals(selcal.EvaluationResult(models, selcal.Options()), resamples=40,
                  progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (80, 80) and all(t == 80 for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_refit_progress_counts_each_refitted_resample():
    from selcal.bootstrap import RefitData, add_intervals

    logits, labels = make_data(n=300, seed=40)
    val_logits, val_labels = make_data(n=200, seed=41)
    model = selcal.evaluate_arrays(logits, labels, val_logits, val_labels, name="m")
    calls = []
    add_intervals(selcal.EvaluationResult([model], selcal.Options()), resamples=6,
                  refit=[RefitData(logits, labels, val_logits, val_labels)],
                  progress=lambda done, total: calls.append(done))
    assert calls[:6] == [1, 2, 3, 4, 5, 6]  # one step per refitted resample, then the block


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "compare"])
def test_progress_only_on_a_terminal(cli, dumps, command):
    logits, labels = make_data(n=300, seed=9)
    path = dumps.npz("m.npz", logits, labels)
    args = ["evaluate", path, "--bootstrap", "30", "-q"] if command == "evaluate" else \
        ["compare", path, path, "--bootstrap", "30", "-q"]
    piped = cli(*args, env={"FORCE_COLOR": None, "TTY_COMPATIBLE": None})
    assert piped.exit_code == 0 and "resamples" not in piped.stderr
    # rich takes stderr for an interactive terminal; -q silences the bars there too
    terminal_env = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "TERM": "xterm"}
    if command == "evaluate":  # evaluate's -q silences its bars too
        quiet = cli(*args, env=terminal_env)
        assert quiet.exit_code == 0 and "resamples" not in quiet.stderr
        args = [a for a in args if a != "-q"]
    terminal = cli(*args, env=terminal_env)
    assert terminal.exit_code == 0 and "bootstrap resamples" in terminal.stderr


def test_the_rows_bar_turns_during_the_fits_before_any_row_is_counted(monkeypatch, capsys):
    import time

    from selcal.cli import progress as commands

    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("TTY_INTERACTIVE", "1")
    monkeypatch.setenv("TERM", "xterm")
    with commands.count_bar("models") as models, commands.progress_bar(delay=0.01) as advance:
        assert advance is not None and models is not None
        time.sleep(0.3)  # fitting: advance not called yet
        advance(10, 20)
        models(1, 2)
    assert "reading, fitting" in capsys.readouterr().err
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    with commands.progress_bar(delay=0.0) as advance:
        assert advance is None
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", ["\x1d", "\n", "\r", "\u2028", "\x85", "\x0b"])
def test_an_error_quoting_a_hostile_column_name_stays_one_line(tmp_path, bad):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({f"lab{bad}el": [0, 1], "logits": [[0.0, 1.0], [1.0, 0.0]]}), path)
    from typer.testing import CliRunner

    from selcal.cli import app

    result = CliRunner().invoke(app, ["evaluate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.stderr
    assert bad.encode("unicode_escape").decode() in lines[0]


@pytest.mark.slow
def test_python_m_selcal_cli_knows_every_command():
    """``python -m selcal.cli threshold`` said 'No such command': the module ran as __main__ before
    the threshold command was registered at its end."""
    import subprocess
    import sys

    from selcal.cli import app

    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert names == ["evaluate", "compare", "check", "study", "threshold", "dump", "pixels", "ensemble"]  # (the help's order)
    done = subprocess.run([sys.executable, "-m", "selcal.cli", "threshold", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "certified" in done.stdout, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_an_empty_text_dump_is_refused_in_one_line(tmp_path, suffix):
    # A 0-byte file (a writer killed before its first line): said as it is, not as a missing label column
    # (CSV) or a JSON parser's message (JSON Lines).
    path = tmp_path / f"dump{suffix}"
    path.write_bytes(b"")
    out = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(path)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [f"selcal: error: {path}: is empty (0 bytes): no header and no rows; "
                                               "was it written completely?"]


def test_a_narrow_terminal_shows_every_value_whole(tmp_path, cli):
    """COLUMNS=20: the tables that do not fit become stacked tables or plain lines (wrapped by
    the terminal), never cells cut to '…'."""
    import io

    from rich.console import Console

    import selcal
    from selcal.checks import check

    path = write_parquet(tmp_path / "m.parquet", n=400, extra={"source": pa.array(["a", "b"] * 200)})
    result = cli("evaluate", path, "--group-col", "source", "--no-warnings", env={"COLUMNS": "20"})
    assert result.exit_code == 0, result.stderr
    assert "…" not in result.stdout
    model = json.loads(cli("evaluate", path, "--json", "-", "--group-col", "source").stdout)["models"][0]
    for value in (model["scores"]["msp"]["aurc"], model["accuracy"]):
        assert f"{100 * value:.2f}" in result.stdout  # the values themselves, whole
    evaluated = json.loads(selcal.evaluate([str(path)]).to_json())
    worse = json.loads(json.dumps(evaluated))
    worse["models"][0]["scores"]["msp"]["aurc"] += 0.125
    out = io.StringIO()
    check(worse, evaluated).render(Console(file=out, width=20), show_all=True)
    assert "…" not in out.getvalue() and "REGRESSION" in out.getvalue()
