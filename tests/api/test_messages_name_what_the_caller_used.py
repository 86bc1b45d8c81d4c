"""A file read by the Python API (``selcal.evaluate(path, input_kind=...)``, ``selcal.threshold``) is refused
naming the Python arguments (``input_kind='probs'``, ``scores='msp,temp'``), which is what its caller passed;
the same file on the command line names the flags (``--input probs``, ``--scores msp,temp``). The face is the
caller's, whatever ran before in the process (a command run in-process leaves the Python face as it was)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import SAMPLES, one_error_line

import selcal
import selcal.checks
from selcal.errors import SelcalError

RNG = np.random.default_rng(5)
N = 60


@pytest.fixture
def files(tmp_path):
    """logits (N x 3), probabilities (N x 3) and one binary logit per row, as Parquet files."""
    labels = RNG.integers(0, 3, N)
    logits = RNG.normal(0, 2, (N, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    binary = RNG.normal(0, 2, N)
    paths = {}
    for name, columns in (("logits", {"label": labels, "logits": pa.array(list(logits))}),
                          ("probs", {"label": labels, "logits": pa.array(list(probs))}),
                          ("binary", {"label": (binary > 0).astype(np.int64), "logit": binary})):
        paths[name] = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table(columns), paths[name])
    return paths


# (file, Python keywords, command-line flags, what the Python caller reads, what the command line prints)
CASES = {
    "not-probabilities": ("logits", dict(input_kind="probs"), ["--input", "probs"],
                          "but input_kind='probs' was given; fix the row, or pass input_kind='logits'",
                          "but --input probs was given; fix the row, or pass --input logits"),
    "not-log-probabilities": ("logits", dict(input_kind="logprobs"), ["--input", "logprobs"],
                              "but input_kind='logprobs' was given; fix the row, or pass input_kind='logits'",
                              "but --input logprobs was given; fix the row, or pass --input logits"),
    "one-column": ("binary", dict(input_kind="probs", scores="msp"), ["--input", "probs", "--scores", "msp"],
                   "not a probability of class 1 (input_kind='probs'); pass input_kind='logits' to read it as a logit",
                   "not a probability of class 1 (--input probs); pass --input logits to read it as a logit"),
    "scores-need-logits": ("probs", dict(scores="max_logit"), ["--scores", "max_logit"],
                           "choose scores that do not (e.g. scores='msp,temp'), or pass input_kind='logits'",
                           "choose scores that do not (e.g. --scores msp,temp), or pass --input logits"),
    "unknown-kind": ("logits", dict(input_kind="odds"), ["--input", "odds"],
                     "input_kind must be one of logits, probs, logprobs, got 'odds'",
                     "--input must be one of logits, probs, logprobs, got 'odds'"),
}


def refused(call) -> str:
    with pytest.raises(SelcalError) as error:
        call()
    text = str(error.value)
    assert "\n" not in text and "--" not in text, text
    return text


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_evaluate_names_input_kind_where_its_caller_passed_it(files, case, stream):
    name, keywords, _, said, _ = CASES[case]
    assert said in refused(lambda: selcal.evaluate(files[name], stream=stream, **keywords))


@pytest.mark.parametrize("case", list(CASES))
def test_the_command_line_names_its_flags(files, cli, case):
    name, _, flags, _, said = CASES[case]
    one_error_line(cli("evaluate", files[name], *flags), said)


def test_python_names_its_arguments_after_a_command_ran_in_the_same_process(files, cli):
    name, keywords, flags, python_said, command_said = CASES["one-column"]
    one_error_line(cli("evaluate", files[name], *flags), command_said)
    assert python_said in refused(lambda: selcal.evaluate(files[name], **keywords))


def test_threshold_names_input_kind_and_ood_label_on_a_file_of_confidences(tmp_path):
    path = tmp_path / "conf.parquet"
    pq.write_table(pa.table({"confidence": np.linspace(0.3, 0.9, 40), "pred": np.zeros(40, np.int64),
                             "label": np.zeros(40, np.int64)}), path)
    assert refused(lambda: selcal.threshold(path, input_kind="probs")).endswith(
        "input_kind has no meaning for a file of confidences (it holds no logits); leave out input_kind")
    assert refused(lambda: selcal.threshold(path, ood_label=7)).endswith("leave out ood_label")


# ---------------------------------------------------------------- the readers' other arguments (label_col, ...)


@pytest.fixture
def reader_files(files, tmp_path):
    """``files`` and: two list columns, a label outside the classes, a file of confidences with no column
    'confidence'."""
    labels = RNG.integers(0, 3, N)
    logits = RNG.normal(0, 2, (N, 3))
    paths = dict(files)
    for name, columns in (("two-lists", {"label": labels, "a": pa.array(list(logits)), "b": pa.array(list(logits))}),
                          ("label-7", {"label": np.where(np.arange(N) == 5, 7, labels), "logits": pa.array(list(logits))}),
                          ("confidences", {"conf": np.linspace(0.3, 0.9, N), "pred": np.zeros(N, np.int64),
                                           "label": np.zeros(N, np.int64)})):
        paths[name] = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table(columns), paths[name])
    return paths


# (TEST files, val files, Python keywords, command-line flags, what the Python caller reads, what the command line prints)
READER_CASES = {
    "label_col": (["logits"], [], dict(label_col="target"), ["--label-col", "target"],
                  "no label column 'target' (columns: label, logits); name it with label_col",
                  "no label column 'target' (columns: label, logits); name it with --label-col"),
    "logits_col": (["two-lists"], [], {}, [], "several list columns (a, b); name the logits with logits_col",
                   "several list columns (a, b); name the logits with --logits-col"),
    "ignore_label-ood_label": (["label-7"], [], {}, [],
                               "(use ignore_label for a void label, ood_label for rows of no class)",
                               "(use --ignore-label for a void label, --ood-label for rows of no class)"),
    "ood_label-and-ignore_label": (["logits"], [], dict(ood_label=7, ignore_label=7),
                                   ["--ood-label", "7", "--ignore-label", "7"],
                                   "ood_label and ignore_label are both 7", "--ood-label and --ignore-label are both 7"),
    "val": (["logits", "probs"], ["logits"], {}, [], "got 2 TEST files but 1 val files; give one val per file",
            "got 2 TEST files but 1 --val files; give one --val per file"),
    "score_cols-twice": (["logits"], [], dict(score_cols=["x", "x"]), ["--score-col", "x", "--score-col", "x"],
                         "give each column once, by its name (score_cols, uncertainty_cols)",
                         "give each column once, by its name (--score-col, --uncertainty-col)"),
    "score_cols": (["confidences"], [], {}, [],
                   "name the confidence with score_cols or the uncertainty with uncertainty_cols",
                   "name the confidence with --score-col or the uncertainty with --uncertainty-col"),
}


@pytest.mark.parametrize("case", list(READER_CASES))
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_evaluate_names_the_readers_arguments_where_its_caller_passed_them(reader_files, case, stream):
    tests, vals, keywords, _, said, _ = READER_CASES[case]
    paths = [reader_files[name] for name in tests]
    val = [reader_files[name] for name in vals] or None
    assert said in refused(lambda: selcal.evaluate(paths if len(paths) > 1 else paths[0], val, stream=stream,
                                                   **keywords))


@pytest.mark.parametrize("case", list(READER_CASES))
def test_the_command_line_names_the_readers_flags(reader_files, cli, case):
    tests, vals, _, flags, _, said = READER_CASES[case]
    val_flags = [part for name in vals for part in ("--val", reader_files[name])]
    one_error_line(cli("evaluate", *[reader_files[name] for name in tests], *val_flags, *flags), said)


# ------------------------------------------- the hold-out, the fits, threshold and compare (val, ood_label, ...)
# Their code knows no caller: the face is the one set where the call entered (the command's callback, or the
# Python default), read by selcal.errors.said, and carried to threads and Ray tasks.

M = 200  # rows of the files below
LSPAIR = SAMPLES / "lspair_alpha0.parquet"  # (two groups in its column 'source')


@pytest.fixture
def face_files(tmp_path):
    """Parquet files of M rows of 3 classes unless said: a TEST file, its per-class columns (p_a, p_b, p_c), 2 rows,
    1 row, 20 rows of label 7, split columns (all 'val', all 'test', half each), the same logits with other labels,
    a logit beyond float32's range, a file of confidences, probabilities."""
    labels, logits = RNG.integers(0, 3, M), RNG.normal(0, 2, (M, 3))
    huge = logits.copy()
    huge[7, 1] = 1e39
    made = {"logits": {}, "named": {f"p_{c}": logits[:, k] for k, c in enumerate("abc")},
            "rows-2": {"rows": 2}, "rows-1": {"rows": 1}, "all-ood": {"label": np.full(M, 7), "rows": 20},
            "only-val": {"split": ["val"] * M}, "no-val": {"split": ["test"] * M},
            "halves": {"split": ["val", "test"] * (M // 2)}, "other-labels": {"label": (labels + 1) % 3},
            "huge": {"logits": pa.array(list(huge))},
            "confidences": {"confidence": np.linspace(0.3, 0.9, M), "pred": np.zeros(M, np.int64), "logits": None},
            "probabilities": {"logits": pa.array(list(np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)))}}
    paths = {}
    for name, columns in made.items():
        rows = columns.pop("rows", M)
        table = {"label": labels, "logits": pa.array(list(logits))} if name != "named" else {"label": labels}
        table.update(columns)
        table = {key: value[:rows] for key, value in table.items() if value is not None}
        paths[name] = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table(table), paths[name])
    return paths


def threshold_of(test, val=None, **keywords):
    return lambda p: selcal.threshold(p[test], None if val is None else p[val], **keywords)


def evaluate_of(test, val=None, **keywords):
    return lambda p: selcal.evaluate(p[test], None if val is None else p[val], **keywords)


def compare_of(a, b, val=(), **keywords):
    return lambda p: selcal.checks.compare_files(p[a], p[b], val=[p[v] for v in val], **keywords)


# case: (the Python call, the command (file names stand for their paths), what Python reads, what the command prints)
FACE_CASES = {
    "logits_col-names-no-column": (
        evaluate_of("named", logits_col="p_a,p_z"), ["evaluate", "named", "--logits-cols", "p_a,p_z"],
        "logits_col='p_a,p_z' names 'p_z', which is not a column", "--logits-cols p_a,p_z names 'p_z', which is not"),
    "logits_col-matches-nothing": (
        evaluate_of("named", logits_col="q_*"), ["evaluate", "named", "--logits-cols", "q_*"],
        "logits_col='q_*': no column names start with 'q_'", "--logits-cols q_*: no column names start with 'q_'"),
    "hold-out-too-small": (
        evaluate_of("rows-2", scores="temp"), ["evaluate", "rows-2", "--scores", "temp"],
        "give a larger file, val=FILE, or a split column", "give a larger file, --val FILE, or a split column"),
    "fit-on-no-class": (
        evaluate_of("logits", "all-ood", ood_label=7, scores="temp"),
        ["evaluate", "logits", "--val", "all-ood", "--ood-label", "7", "--scores", "temp"],
        "every validation row is of no class (ood_label)", "every validation row is of no class (--ood-label)"),
    "calibrator-rows": (
        evaluate_of("logits", "rows-2", scores="dirichlet"), ["evaluate", "logits", "--val", "rows-2", "--scores",
                                                              "dirichlet"],
        "give more validation rows (val, a split column or a larger val_fraction)",
        "give more validation rows (--val, a split column or a larger --val-fraction)"),
    "threshold-too-few-rows": (
        threshold_of("logits", "rows-2"), ["threshold", "logits", "--val", "rows-2"],
        "(val=FILE, a split column or a larger val_fraction), a larger risk or a larger delta",
        "(--val FILE, a split column or a larger --val-fraction), a larger --risk or a larger --delta"),
    "threshold-one-row-to-halve": (
        threshold_of("logits", "rows-1", score="temp"), ["threshold", "logits", "--val", "rows-1", "--score", "temp"],
        "cannot be halved: temp is fitted on a half of the validation rows and the threshold certified on the other; "
        "give more validation rows (val=FILE, a split column or a larger val_fraction)",
        "cannot be halved: temp is fitted on a half of the validation rows and the threshold certified on the other; "
        "give more validation rows (--val FILE, a split column or a larger --val-fraction)"),
    "threshold-only-val-rows": (
        threshold_of("only-val"), ["threshold", "only-val"],
        "as TEST and this file as val=FILE", "as TEST and this file as --val FILE"),
    "threshold-no-val-rows": (
        threshold_of("no-val"), ["threshold", "no-val"], "no calibration rows; give val=FILE, or mark",
        "no calibration rows; give --val FILE, or mark"),
    "threshold-score-needs-logits": (
        threshold_of("probabilities", score="max_logit", input_kind="probs"),
        ["threshold", "probabilities", "--score", "max_logit", "--input", "probs"],
        "(e.g. score='msp' or score='temp')", "(e.g. --score msp or --score temp)"),
    "threshold-score_col-absent": (
        threshold_of("confidences", score_col="nope"), ["threshold", "confidences", "--score-col", "nope"],
        "give score_col one of them", "give --score-col one of them"),
    "threshold-score-of-confidences": (
        threshold_of("confidences", score="temp"), ["threshold", "confidences", "--score", "temp"],
        "name another column with score_col=COLUMN", "name another column with --score-col COLUMN"),
    "threshold-score_col-of-logits": (
        threshold_of("logits", score_col="x"), ["threshold", "logits", "--score-col", "x"],
        "choose a registered score with score", "choose a registered score with --score"),
    "threshold-val-of-logits": (
        threshold_of("confidences", "logits"), ["threshold", "confidences", "--val", "logits"],
        "give a val file of confidences", "give a --val file of confidences"),
    "threshold-per_class-and-group_col": (
        threshold_of("logits", group_col="g", per_class=True), ["threshold", "logits", "--group-col", "g",
                                                                 "--per-class"],
        "per_class groups the rows by their predicted class and group_col by a column",
        "--per-class groups the rows by their predicted class and --group-col by a column"),
    "threshold-delta_per_group-alone": (
        threshold_of("logits", delta_per_group=True), ["threshold", "logits", "--delta-per-group"],
        "give group_col=G or per_class=True, or leave out delta_per_group",
        "give --group-col G or --per-class, or leave out --delta-per-group"),
    "threshold-by-label": (
        threshold_of("halves", group_col="label"), ["threshold", "halves", "--group-col", "label"],
        "or use per_class=True (the predicted class)", "or use --per-class (the predicted class)"),
    "threshold-delta-split-too-small": (
        lambda p: selcal.threshold(LSPAIR, group_col="source", delta=1e-300, risk=0.9),
        ["threshold", LSPAIR, "--group-col", "source", "--delta", "1e-300", "--risk", "0.9"],
        "give a larger delta, fewer groups, or delta_per_group=True",
        "give a larger --delta, fewer groups, or --delta-per-group"),
    "threshold-float32-overflow": (
        threshold_of("huge", dtype="float32", risk=0.9), ["threshold", "huge", "--dtype", "float32", "--risk", "0.9"],
        "use dtype='float64' for these logits", "use --dtype float64 for these logits"),
    "compare-one-val": (
        compare_of("logits", "logits", val=["logits"]), ["compare", "logits", "logits", "--val", "logits"],
        "val takes two files (A's, then B's) or not at all; got 1",
        "compare takes --val twice (A's, then B's) or not at all; got 1"),
    "compare-other-split-rules": (
        compare_of("halves", "logits"), ["compare", "halves", "logits"],
        "give both a split column, or val for both", "give both a split column, or --val for both"),
    "compare-other-labels": (
        compare_of("logits", "other-labels"), ["compare", "logits", "other-labels"],
        "(or give allow_other_data=True)", "(or give --allow-other-data)"),
}


@pytest.mark.parametrize("case", list(FACE_CASES))
def test_python_names_the_arguments_of_the_hold_out_fits_threshold_and_compare(face_files, case):
    call, _, said, _ = FACE_CASES[case]
    assert said in refused(lambda: call(face_files))


@pytest.mark.parametrize("case", list(FACE_CASES))
def test_the_command_line_names_the_flags_of_the_hold_out_fits_threshold_and_compare(face_files, cli, case):
    _, command, _, said = FACE_CASES[case]
    one_error_line(cli(*[face_files.get(part, part) for part in command]), said)


def test_a_lm_eval_folder_given_to_threshold_names_lm_choices(cli):
    folder = SAMPLES / "lm_eval" / "synthetic__llm-small"
    assert "(with lm_choices=K for the questions" in refused(lambda: selcal.threshold(folder))
    one_error_line(cli("threshold", folder), "(with --lm-choices K for the questions")


def test_fit_scores_without_validation_rows_names_val_and_scores():
    from selcal.errors import command_line
    from selcal.options import Options
    from selcal.pipeline.measure import fit_scores

    call = lambda: fit_scores(None, None, Options(scores=("msp", "temp")), where="m.parquet")  # noqa: E731
    assert refused(call).endswith("give val=FILE, a split column, or use scores='msp,max_logit'")
    with command_line():
        with pytest.raises(SelcalError, match="give --val FILE, a split column, or use --scores msp,max_logit$"):
            call()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_warnings_of_a_val_file_name_val_and_ood_label(face_files, stream):
    warnings = selcal.evaluate(face_files["logits"], face_files["logits"], scores="temp",
                               stream=stream).models[0].warnings
    for said in (f"val='{face_files['logits']}' is the TEST file itself", "pass a val file without the TEST rows"):
        assert any(said in warning for warning in warnings), warnings
    warnings = selcal.evaluate(face_files["logits"], face_files["halves"], ood_label=0, scores="temp",
                               stream=stream).models[0].warnings
    assert any("validation rows are of no class (ood_label): temp is fitted on the other" in w for w in warnings)
    assert not any("--" in warning for warning in warnings), warnings


def test_the_command_line_warns_of_a_val_file_naming_val_and_ood_label(face_files, cli):
    result = cli("evaluate", face_files["logits"], "--val", face_files["logits"], "--scores", "temp")
    assert result.exit_code == 0 and f"--val {face_files['logits']} is the TEST file itself" in result.stderr
    assert "pass a --val file without the TEST rows" in result.stderr
    result = cli("evaluate", face_files["logits"], "--val", face_files["halves"], "--ood-label", "0", "--scores", "temp")
    assert result.exit_code == 0, result.stderr
    assert "validation rows are of no class (--ood-label): temp is fitted on the other" in result.stderr


def test_compare_notes_name_resamples_and_allow_other_data(face_files, cli):
    report = selcal.checks.compare_files(face_files["logits"], face_files["other-labels"], resamples=20,
                                         allow_other_data=True)
    notes = " ".join(report.notes)
    assert "give resamples=" in notes and "allow_other_data=True: the two models' rows hold other labels" in notes
    assert "judged: the primary metrics (only or all_metrics=True for others)" in notes and "--" not in notes, notes
    result = cli("compare", face_files["logits"], face_files["other-labels"], "--bootstrap", "20",
                 "--allow-other-data")
    shown = " ".join(result.stdout.split())
    assert "give --bootstrap " in shown and "--allow-other-data: the two models' rows hold other labels" in shown
    assert "judged: the primary metrics (--metric or --all for others)" in shown


def test_compare_names_only_as_its_caller_did(face_files, cli):
    from selcal.checks import parse_specs

    assert refused(lambda: selcal.checks.compare_files(face_files["logits"], face_files["logits"], resamples=20,
                                                       only=parse_specs(["dirichlet.aurc"], "only"))).startswith(
        "only dirichlet.aurc: the comparison has no such metric")
    one_error_line(cli("compare", face_files["logits"], face_files["logits"], "--bootstrap", "20", "--metric",
                       "dirichlet.aurc"), "--metric dirichlet.aurc: the comparison has no such metric",
                   "(a group's, --group-col)")


# ---------------------------------------------- check and study (baseline, maxima, minima, metrics, pattern, ...)
# selcal.checks.check reads result dicts (load_result) and takes parsed specs; selcal.study takes the runs' paths.


@pytest.fixture
def check_study_files(face_files, tmp_path):
    """Result JSON files of face_files' 'logits' (its default scores; and with 'entropy' too) and of its 'other-labels'
    (other data); a study's runs (recipes ce and ls, seeds 0 and 1, data set d1) and one run of other rows."""
    from helpers import write_run, write_study

    paths = {}
    for name, test, scores in (("current", "logits", None), ("more", "logits", "msp,max_logit,pnorm,temp,entropy"),
                               ("other", "other-labels", None)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(selcal.evaluate(face_files[test], **({"scores": scores} if scores else {})).to_json())
    paths["runs"] = write_study(tmp_path / "runs", recipes=("ce", "ls"), seeds=(0, 1), n=200, n_val=80)
    paths["odd-run"] = write_run(tmp_path / "runs" / "d1" / "ls_seed7.parquet", n=150, n_val=80)
    return paths


PATTERN = "{dataset}/{recipe}_seed{seed}.parquet"


def check_of(baseline=None, **bounds):
    """selcal.checks.check of 'current' against ``baseline`` (a file's name); ``bounds``: check's keywords, each
    a list of texts parsed as a Python caller does (parse_bounds and parse_specs naming the argument)."""
    def call(p):
        from selcal.checks import load_result, parse_bounds, parse_specs

        parsed = {name: (parse_specs if name == "only" else parse_bounds)(texts, name) if isinstance(texts, list)
                  else texts for name, texts in bounds.items()}
        return selcal.checks.check(load_result(p["current"]), None if baseline is None else load_result(p[baseline]),
                                   **parsed)
    return call


def study_of(*runs, **keywords):
    """selcal.study of the runs named (``runs``: the four of check_study_files, ``odd-run``: its odd one)."""
    return lambda p: selcal.study([path for name in runs for path in
                                   (p[name] if isinstance(p[name], list) else [p[name]])], scores="msp", **keywords)


# case: (the Python call, the command (file names stand for their paths), what Python reads, what the command prints,
# refused or noted)
CHECK_STUDY_CASES = {
    "check-nothing-to-check": (
        check_of(), ["check", "current"], "nothing to check: give baseline and/or maxima/minima bounds",
        "nothing to check: give --baseline BASELINE.json and/or --max/--min bounds", "refused"),
    "check-max-of-no-metric": (
        check_of(maxima=["dirichlet.aurc=0.1"]), ["check", "current", "--max", "dirichlet.aurc=0.1"],
        "maxima dirichlet.aurc: CURRENT has no such metric", "--max dirichlet.aurc: ", "refused"),
    "check-min-of-no-metric": (
        check_of(minima=["dirichlet.aurc=0.1"]), ["check", "current", "--min", "dirichlet.aurc=0.1"],
        "minima dirichlet.aurc: CURRENT has no such metric", "--min dirichlet.aurc: ", "refused"),
    "check-metric-of-no-metric": (
        check_of("current", only=["dirichlet.aurc"]), ["check", "current", "--baseline", "current", "--metric",
                                                       "dirichlet.aurc"],
        "only dirichlet.aurc: CURRENT has no such metric", "--metric dirichlet.aurc: ", "refused"),
    "check-tolerance-of-no-metric": (
        check_of("current", tolerances=["dirichlet.aurc=0.01"]),
        ["check", "current", "--baseline", "current", "--tolerance", "dirichlet.aurc=0.01"],
        "tolerances dirichlet.aurc: CURRENT has no such metric", "--tolerance dirichlet.aurc: ", "refused"),
    "check-tolerance-without-baseline": (
        check_of(tolerances=["aurc=0.01"], maxima=["aurc=0.9"]),
        ["check", "current", "--tolerance", "aurc=0.01", "--max", "aurc=0.9"],
        "tolerances needs baseline to compare against", "--tolerance needs --baseline BASELINE.json to compare against",
        "refused"),
    "check-negative-tolerance": (
        check_of("current", tolerances=["aurc=-0.1"]), ["check", "current", "--baseline", "current", "--tolerance",
                                                        "aurc=-0.1"],
        "tolerances aurc=-0.1: a tolerance must be >= 0", "--tolerance aurc=-0.1: a tolerance must be >= 0", "refused"),
    "check-max-beyond-the-range": (
        check_of(maxima=["msp.aurc=150%"]), ["check", "current", "--max", "msp.aurc=150%"],
        "maxima msp.aurc=150%: AURC is between 0% and 100%: a bound of 150% never fails",
        "--max msp.aurc=150%: AURC is between 0% and 100%: a bound of 150% never fails", "refused"),
    "check-other-data": (
        check_of("other"), ["check", "current", "--baseline", "other"],
        "judge it on the baseline's rows, or give allow_other_data=True",
        "judge it on the baseline's rows, or give --allow-other-data", "refused"),
    "check-baseline-of-more-scores": (
        check_of("more"), ["check", "current", "--baseline", "more"],
        "evaluate with the same scores/risks/coverages as the baseline",
        "evaluate with the same --scores/--risks/--coverages as the baseline", "refused"),
    "check-note-other-data": (
        check_of("other", allow_other_data=True), ["check", "current", "--baseline", "other", "--allow-other-data"],
        "allow_other_data=True: '", "--allow-other-data: '", "noted"),
    "check-note-no-intervals": (
        check_of("current"), ["check", "current", "--baseline", "current"],
        "(evaluate with bootstrap=1000 to discount noise)", "(evaluate with --bootstrap 1000 to discount noise)",
        "noted"),
    "study-no-pattern": (
        study_of("runs"), ["study", "runs", "--scores", "msp"],
        "give the runs' recipes and seeds by pattern=TEMPLATE or manifest=FILE (one of them)",
        "give the runs' recipes and seeds by --pattern TEMPLATE or --manifest FILE (one of them)", "refused"),
    "study-manifest-and-runs": (
        study_of("runs", manifest="m.csv"), ["study", "runs", "--manifest", "m.csv", "--scores", "msp"],
        "manifest lists the runs: give no paths beside it", "--manifest lists the runs: give no dumps beside it",
        "refused"),
    "study-pattern-without-seed": (
        study_of("runs", pattern="{recipe}.parquet"), ["study", "runs", "--pattern", "{recipe}.parquet", "--scores",
                                                       "msp"],
        "pattern {recipe}.parquet: has no {seed} field", "--pattern {recipe}.parquet: has no {seed} field", "refused"),
    "study-path-not-matched": (
        study_of("runs", pattern="{dataset}/{recipe}_run{seed}.parquet"),
        ["study", "runs", "--pattern", "{dataset}/{recipe}_run{seed}.parquet", "--scores", "msp"],
        "does not match the template pattern {dataset}", "does not match the template --pattern {dataset}", "refused"),
    "study-metric-with-a-model": (
        study_of("runs", pattern=PATTERN, metrics=["m:msp.aurc"]),
        ["study", "runs", "--pattern", PATTERN, "--metric", "m:msp.aurc", "--scores", "msp"],
        "metrics m:msp.aurc: a study names metrics without a model",
        "--metric m:msp.aurc: a study names metrics without a model", "refused"),
    "study-not-a-metric": (
        study_of("runs", pattern=PATTERN, metrics="nope"),
        ["study", "runs", "--pattern", PATTERN, "--metric", "nope", "--scores", "msp"],
        "metrics nope: 'nope' is not a metric with a direction",
        "--metric nope: 'nope' is not a metric with a direction", "refused"),
    "study-metric-of-no-run": (
        study_of("runs", pattern=PATTERN, metrics="temp.aurc"),
        ["study", "runs", "--pattern", PATTERN, "--metric", "temp.aurc", "--scores", "msp"],
        "metrics temp.aurc: the first run has no such metric", "--metric temp.aurc: the first run has no such metric",
        "refused"),
    "study-metrics-empty-item": (
        study_of("runs", pattern=PATTERN, metrics="msp.aurc,"),
        ["study", "runs", "--pattern", PATTERN, "--metric", "msp.aurc,", "--scores", "msp"],
        "metrics has an empty item in 'msp.aurc,'", "--metric has an empty item in 'msp.aurc,'", "refused"),
    "study-baseline-not-a-recipe": (
        study_of("runs", pattern=PATTERN, baseline="focal"),
        ["study", "runs", "--pattern", PATTERN, "--baseline", "focal", "--scores", "msp"],
        "baseline focal: is not a recipe of the study", "--baseline focal: is not a recipe of the study", "refused"),
    "study-other-rows": (
        study_of("runs", "odd-run", pattern=PATTERN), ["study", "runs", "odd-run", "--pattern", PATTERN, "--scores",
                                                       "msp"],
        "a study compares runs on the same evaluation rows (or give allow_other_data=True)",
        "a study compares runs on the same evaluation rows (or give --allow-other-data)", "refused"),
    "study-bootstrap-of-other-rows": (
        study_of("runs", "odd-run", pattern=PATTERN, allow_other_data=True, bootstrap=20),
        ["study", "runs", "odd-run", "--pattern", PATTERN, "--allow-other-data", "--bootstrap", "20", "--scores",
         "msp"],
        "data set 'd1': bootstrap draws the same rows for every run", "data set 'd1': --bootstrap draws the same rows",
        "refused"),
    "study-note-other-rows": (
        study_of("runs", "odd-run", pattern=PATTERN, allow_other_data=True),
        ["study", "runs", "odd-run", "--pattern", PATTERN, "--allow-other-data", "--scores", "msp"],
        "allow_other_data=True: data set 'd1': the models were not evaluated on the same rows",
        "--allow-other-data: data set 'd1': the models were not evaluated on the same rows", "noted"),
    "study-note-no-verdicts": (
        study_of("runs", pattern=PATTERN, baseline="ce"), ["study", "runs", "--pattern", PATTERN, "--baseline", "ce",
                                                           "--scores", "msp"],
        "no verdicts without intervals: give bootstrap=B (e.g. 1000) to judge the recipes against ce",
        "no verdicts without intervals: give --bootstrap B (e.g. 1000) to judge the recipes against ce", "noted"),
}


@pytest.mark.parametrize("case", list(CHECK_STUDY_CASES))
@pytest.mark.parametrize("face", ["python", "command-line"])
def test_check_and_study_name_what_their_caller_used(check_study_files, cli, face, case):
    call, command, python_said, command_said, kind = CHECK_STUDY_CASES[case]
    if face == "command-line":
        parts = [part for name in command for part in
                 (map(str, check_study_files[name]) if isinstance(check_study_files.get(name), list) else
                  [str(check_study_files.get(name, name))])]
        result = cli(*parts)
        if kind == "refused":
            one_error_line(result, command_said)
        else:
            assert result.exit_code in (0, 1), result.stderr
            assert command_said in " ".join(result.stdout.split()), result.stdout
    elif kind == "refused":
        assert python_said in refused(lambda: call(check_study_files))
    else:
        notes = call(check_study_files).notes
        assert any(python_said in note for note in notes) and not any("--" in note for note in notes), notes
