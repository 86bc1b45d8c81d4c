"""``selcal threshold`` and ``selcal.threshold(...)`` (CONVENTIONS.md, "Deployment thresholds with a
guarantee"): the validation rule of evaluate, every registered score, the JSON of the issue, the
sentence, the table, abstaining said plainly, bad input in one line with exit 2, --plots and
--report."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import SAMPLES, make_data, strict_json

import selcal
from selcal.scores import REGISTRY
from selcal.threshold import guarantee
from selcal.threshold.run import confidence_text, target_text

CALIBRATION_KEYS = ["n", "coverage", "risk", "bound"]
EVALUATION_KEYS = ["n", "coverage", "risk"]
TOP_KEYS = ["method", "score", "risk_target", "delta", "dtype", "threshold", "abstain_all", "calibration", "evaluation"]


def _confident_data(n: int, seed: int = 3, k: int = 5):
    """Logits whose confidence tells errors apart well: a model with a useful MSP."""
    rng = np.random.default_rng(seed)
    margin = rng.exponential(2.0, size=n)
    pred = rng.integers(0, k, size=n)
    logits = rng.normal(0.0, 0.3, size=(n, k))
    logits[np.arange(n), pred] += margin
    p_error = 0.6 * np.exp(-margin)
    labels = np.where(rng.random(n) < p_error, (pred + 1) % k, pred)
    return logits, labels


@pytest.fixture
def split_dump(dumps):
    logits, labels = _confident_data(6000)
    split = ["val"] * 2000 + ["test"] * 4000
    return dumps.parquet("model.parquet", logits, labels, split=split), logits, labels


def _msp(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    return 1.0 / np.exp(shifted).sum(axis=1)


# ------------------------------------------------------------------ the answer and its JSON
@pytest.mark.slow
def test_json_has_exactly_the_keys_of_the_issue(cli, split_dump):
    path, _, _ = split_dump
    result = cli("threshold", path, "--json", "-")
    assert result.exit_code == 0, result.stderr
    answer = strict_json(result.stdout)
    assert list(answer) == TOP_KEYS
    assert list(answer["calibration"]) == CALIBRATION_KEYS and list(answer["evaluation"]) == EVALUATION_KEYS
    assert answer["method"] == "sgr" and answer["score"] == "msp"
    assert answer["risk_target"] == 0.05 and answer["delta"] == 0.1  # the defaults
    assert answer["calibration"]["n"] == 2000 and answer["evaluation"]["n"] == 4000  # the split column


def test_the_numbers_are_those_of_the_core_on_the_split_rows(split_dump):
    path, logits, labels = split_dump
    result = selcal.threshold(str(path), risk=0.05, delta=0.1)
    answer = result.to_dict()
    # independently: MSP from the float32 logits as stored, the val rows calibrate, the test rows evaluate
    stored = logits.astype(np.float32).astype(np.float64)
    msp, correct = _msp(stored), stored.argmax(axis=1) == labels
    cert = guarantee.sgr(msp[:2000], correct[:2000], risk=0.05, delta=0.1)
    assert not cert.abstain_all
    assert answer["threshold"] == pytest.approx(cert.threshold, rel=1e-12)
    assert answer["calibration"]["coverage"] == cert.coverage
    assert answer["calibration"]["bound"] == pytest.approx(cert.bound, rel=1e-12)
    assert answer["calibration"]["risk"] == cert.risk
    accepted = msp[2000:] >= cert.threshold
    assert answer["evaluation"]["coverage"] == accepted.mean()
    assert answer["evaluation"]["risk"] == pytest.approx((accepted & ~correct[2000:]).sum() / accepted.sum())
    assert 0 < answer["threshold"] <= 1  # a probability score reports a probability
    assert answer["calibration"]["bound"] < 0.05


def test_cli_json_equals_the_python_api(cli, split_dump, tmp_path):
    path, _, _ = split_dump
    out = tmp_path / "answer.json"
    result = cli("threshold", path, "--risk", "0.02", "--method", "ltt", "--json", out, "-q")
    assert result.exit_code == 0 and result.stdout == ""
    assert strict_json(out.read_text()) == json.loads(json.dumps(
        selcal.threshold(str(path), risk=0.02, method="ltt").to_dict()))


def test_the_terminal_says_it_in_plain_words(cli, split_dump):
    path, _, _ = split_dump
    result = cli("threshold", path)
    assert result.exit_code == 0
    line = result.stdout.strip()
    assert re.fullmatch(
        r"accept msp >= [0-9.e -]+ \(computed in float64\): \d+\.\d% of new inputs, selective risk at most 5\.0% with 90% confidence "
        r"\(calibration: 2 000 rows, bound \d\.\d\d%\); on the 4 000 evaluation rows: coverage \d+\.\d%, "
        r"risk \d+\.\d%", line), line


def test_several_risks_give_a_table_and_a_list(cli, split_dump):
    path, _, _ = split_dump
    result = cli("threshold", path, "--risk", "0.02,0.05,0.1")
    assert result.exit_code == 0
    assert "target r" in result.stdout and "eval risk" in result.stdout
    for target in ("2.0%", "5.0%", "10.0%"):
        assert target in result.stdout
    answers = strict_json(cli("threshold", path, "--risk", "0.02,0.05,0.1", "--json", "-").stdout)
    assert [a["risk_target"] for a in answers] == [0.02, 0.05, 0.1]
    coverages = [a["calibration"]["coverage"] for a in answers]
    assert coverages == sorted(coverages)  # a looser target never accepts less


def test_nothing_qualifies_abstain_on_everything(cli, dumps):
    # the most confident rows are the wrong ones: no threshold keeps the risk at 5%
    logits, labels = _confident_data(3000)
    labels = np.where(logits.max(axis=1) > np.median(logits.max(axis=1)), (logits.argmax(axis=1) + 1) % 5, labels)
    path = dumps.parquet("bad.parquet", logits, labels, split=["val"] * 1000 + ["test"] * 2000)
    result = cli("threshold", path)
    assert result.exit_code == 0
    assert result.stdout.startswith("abstain on everything: no threshold of msp (computed in float64) keeps the "
                                    "selective risk at most 5.0%")
    answer = strict_json(cli("threshold", path, "--json", "-").stdout)
    assert answer["threshold"] is None and answer["abstain_all"] is True
    assert answer["calibration"] == {"n": 1000, "coverage": 0.0, "risk": None, "bound": None}
    assert answer["evaluation"] == {"n": 2000, "coverage": 0.0, "risk": None}
    table = cli("threshold", path, "--risk", "0.05,0.5")
    assert "abstain on everything" in table.stdout


# ------------------------------------------------------------------ the validation rule of evaluate
def test_the_val_file_calibrates_and_the_test_file_evaluates(cli, dumps):
    logits, labels = _confident_data(3000, seed=5)
    test = dumps.npz("test.npz", logits[:2000], labels[:2000])
    val = dumps.npz("val.npz", logits[2000:], labels[2000:])
    answer = strict_json(cli("threshold", test, "--val", val, "--json", "-").stdout)
    assert answer["calibration"]["n"] == 1000 and answer["evaluation"]["n"] == 2000


def test_without_val_or_split_column_the_seeded_holdout(cli, dumps):
    logits, labels = _confident_data(3000, seed=6)
    path = dumps.parquet("plain.parquet", logits, labels)
    answer = strict_json(cli("threshold", path, "--json", "-").stdout)
    assert answer["calibration"]["n"] == 600 and answer["evaluation"]["n"] == 2400  # --val-fraction 0.2
    again = strict_json(cli("threshold", path, "--json", "-", "--val-fraction", "0.5", "--seed", "3").stdout)
    assert again["calibration"]["n"] == 1500


def test_a_fitted_score_fits_on_half_and_calibrates_on_the_other(split_dump):
    path, _, _ = split_dump
    result = selcal.threshold(str(path), score="temp")
    assert result.n_fit == 1000 and result.entries[0].certificate.n == 1000
    assert result.state.temperature > 0 and result.fit_note.startswith("temp: T = ")
    assert result.to_dict()["calibration"]["n"] == 1000


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registered_score_works(cli, dumps, name):
    logits, labels = _confident_data(1600, seed=7)
    path = dumps.parquet("m.parquet", logits, labels, split=["val"] * 800 + ["test"] * 800)
    result = cli("threshold", path, "--score", name, "--risk", "0.1", "--json", "-")
    assert result.exit_code == 0, result.stderr
    answer = strict_json(result.stdout)
    assert answer["score"] == name
    assert answer["calibration"]["n"] == (400 if REGISTRY[name].needs_fit else 800)


# ------------------------------------------------------------------ bad input: one line, exit 2
@pytest.mark.parametrize("args,expected", [
    (("--risk", "0"), "--risk"), (("--risk", "1"), "--risk"), (("--risk", "0.05,1.5"), "--risk"),
    (("--risk", "x"), "--risk"), (("--delta", "0"), "--delta"), (("--delta", "1"), "--delta"),
    (("--delta", "-0.1"), "--delta"), (("--score", "nope"), "not a registered score"),
    (("--method", "naive"), "--method"),
])
def test_bad_options_are_one_line_and_exit_2(cli, split_dump, tmp_path, args, expected):
    path, _, _ = split_dump
    out = tmp_path / "answer.json"
    result = cli("threshold", path, *args, "--json", out)
    assert result.exit_code == 2
    assert result.stderr.startswith("selcal: error: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_too_few_calibration_rows_for_any_guarantee(cli, dumps, tmp_path):
    logits, labels = make_data(n=300)
    path = dumps.parquet("small.parquet", logits, labels, split=["val"] * 40 + ["test"] * 260)
    out = tmp_path / "answer.json"
    result = cli("threshold", path, "--json", out)  # r = 5%, delta = 10%: 83 rows at least (0.95^83 < 0.1 / 7)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "40 calibration rows cannot certify a selective risk of at most 5.0% with 90% confidence" in result.stderr
    assert "at least 83" in result.stderr
    assert not out.exists()
    assert cli("threshold", path, "--risk", "0.1").exit_code == 0  # 39 rows suffice for 10% (0.9^39 < 0.1 / 6)


def test_a_missing_file_is_one_line(cli, tmp_path):
    result = cli("threshold", tmp_path / "nothing.parquet")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "no such file" in result.stderr


# ------------------------------------------------------------------ figure and report
@pytest.mark.slow
def test_plots_and_report_show_the_thresholds(cli, dumps, tmp_path):
    logits, labels = _confident_data(3000, seed=8)
    path = dumps.parquet("<b>model</b>.parquet", logits, labels, split=["val"] * 1000 + ["test"] * 2000)
    plots, report = tmp_path / "figs", tmp_path / "page.html"
    result = cli("threshold", path, "--risk", "0.02,0.1", "--plots", plots, "--report", report)
    assert result.exit_code == 0, result.stderr
    assert (plots / "threshold.png").read_bytes().startswith(b"\x89PNG")
    page = report.read_text()
    assert "data:image/png;base64," in page
    assert "<b>model</b>" not in page and "&lt;b&gt;model&lt;/b&gt;" in page  # user text escaped
    assert "selective risk at most 2.0% with 90% confidence" in page and "target r" in page


def test_figure_data_marks_each_target(split_dump):
    from selcal.figures.threshold import threshold_figure_data

    path, _, _ = split_dump
    result = selcal.threshold(str(path), risk=[0.05, 0.15])
    data = threshold_figure_data(result)
    assert [m.target for m in data.marks] == [5.0, 15.0]
    for mark, entry in zip(data.marks, result.entries):
        assert mark.bound == pytest.approx(100 * entry.certificate.bound)
        assert mark.coverage == pytest.approx(100 * entry.certificate.coverage)
        assert mark.risk <= mark.bound < mark.target
    assert data.calibration.coverage[-1] == 100.0



def test_a_score_with_its_own_predictions_is_judged_by_them(dumps):
    # a registered score whose probabilities put the top class one step further: its predictions,
    # hence its errors, are not the model's; the certificate must count its own errors
    from selcal.scores import registry

    def shifted(logits, state):
        probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        return np.roll(probabilities, 1, axis=1)

    selcal.register_score("rolled", score=lambda v, s: shifted(v, s).max(axis=1), probabilities=shifted)
    try:
        logits, labels = _confident_data(3000, seed=9)
        path = dumps.parquet("m.parquet", logits, labels, split=["val"] * 1000 + ["test"] * 2000)
        result = selcal.threshold(str(path), score="rolled", risk=0.5)
        stored = logits.astype(np.float32).astype(np.float64)
        own = (stored.argmax(axis=1) + 1) % 5 == labels  # the rolled argmax
        probabilities = shifted(stored, None)
        cert = guarantee.sgr(probabilities.max(axis=1)[:1000], own[:1000], risk=0.5, delta=0.1)
        entry = result.entries[0]
        assert (entry.certificate.accepted, entry.certificate.errors) == (cert.accepted, cert.errors)
        assert entry.threshold == pytest.approx(cert.threshold)  # a probability, shown as it is
        assert result.probability
    finally:
        registry.REGISTRY.pop("rolled", None)


@pytest.mark.slow
def test_pixel_rows_are_halved_by_image_and_warned_about(cli):
    # segmentation folders: calibration and fit halves are whole images; pixels are not independent
    folder = SAMPLES / "seg_alpha0"
    result = selcal.threshold(str(folder), score="temp", risk=0.05)
    assert result.split == "image-holdout" and result.n_fit > 0
    assert any("pixels of images" in w for w in result.warnings)
    run = cli("threshold", folder, "--risk", "0.05")
    assert run.exit_code == 0 and "not independent" in run.stderr


def test_a_threshold_within_1e_16_of_one_is_shown_apart_from_one(dumps):
    # confident rows whose MSP is 1.0 in float64 but whose log-MSP is not 0: the threshold shows as
    # 1 - 1e-20-ish (from the log), never as "1 - 0"
    from selcal.threshold.run import format_threshold

    rng = np.random.default_rng(4)
    n = 4000
    margin = rng.uniform(40.0, 60.0, size=n)  # exp(-margin) < 1e-17: MSP rounds to 1.0
    logits = np.zeros((n, 3))
    logits[:, 0] = margin
    labels = np.zeros(n, dtype=np.int64)
    labels[rng.random(n) < np.exp(-(margin - 40.0) / 4)] = 1  # errors among the least confident
    path = dumps.parquet("sure.parquet", logits, labels, dtype="float64", split=["val"] * 2000 + ["test"] * 2000)
    entry = selcal.threshold(str(path), risk=0.05).entries[0]
    assert entry.threshold == 1.0 and 0 < entry.complement < 1e-16
    assert format_threshold(entry).startswith("1 - ") and format_threshold(entry) != "1 - 0"


@pytest.mark.slow
def test_a_vanishing_risk_target_is_refused_at_once_not_after_counting_rows(tmp_path):
    """--risk 1e-300 walked one row at a time from ~2e300 rows: selcal threshold never returned."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 3))
    labels = logits.argmax(1)
    path = tmp_path / "m.npz"
    np.savez(path, logits=logits, labels=labels)
    run = subprocess.run([sys.executable, "-c", "from selcal.cli import run; run()", "threshold", str(path),
                          "--risk", "1e-300"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error:"), run.stderr
    # SGR on m rows tests at delta / ceil(log2 m): (1 - 1e-300)^m < 0.1 / 1000 needs 9.21e+300 rows
    assert "1e-298%" in lines[0] and "9.21e+300 rows" in lines[0]  # not "at most 0.0%", not 300 digits
    assert guarantee.minimum_rows(1e-300, 0.1) > 10 ** 299


def test_targets_and_confidences_never_round_to_a_different_promise():
    """A risk of 1e-300 read 'at most 0.0%'; a delta of 1e-5 read '100% confidence'."""
    assert target_text(1e-300) == "1e-298%" and target_text(0.05) == "5.0%" and target_text(0.0001) == "0.01%"
    assert confidence_text(1e-5) == "99.999%" and confidence_text(0.1) == "90%"
    assert confidence_text(1e-300) == "(1 - 1e-300)"
