"""``selcal threshold`` on the inputs evaluate reads beyond one in-memory dump: lm-evaluation-harness
logs that mix numbers of choices (``--lm-choices K``), files of confidences without logits, and
large files streamed by row chunks (the same numbers, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SAMPLES, one_error_line, strict_json

import selcal
from selcal.io import read_dump
from selcal.threshold.run import threshold_dump

LOGS = SAMPLES / "lm_eval" / "synthetic__llm-large"
MIXED = LOGS / "samples_arc_synth_2026-11-25T14-00-00.000000.jsonl"  # 11 questions of 3 choices, 63 of 4, 26 of 5
SINGLE = LOGS / "samples_mmlu_synth_2026-11-25T14-00-00.000000.jsonl"


# ------------------------------------------------------------------ --lm-choices
def test_lm_choices_certifies_on_the_questions_of_k_choices(cli):
    result = cli("threshold", MIXED, "--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert result.exit_code == 0, result.stderr
    answer = strict_json(result.stdout)
    assert answer["calibration"]["n"] + answer["evaluation"]["n"] == 63  # the questions of 4 choices only
    # the same as the threshold of those questions read directly (the reader's lm_choices)
    direct = threshold_dump(read_dump(MIXED, lm_choices=4), risk=0.3, options=selcal.Options(val_fraction=0.5))
    assert answer == strict_json(direct.to_json())
    assert selcal.threshold(str(MIXED), lm_choices=4, risk=0.3, val_fraction=0.5).name == \
        "synthetic__llm-large/arc_synth (4 choices)"


@pytest.mark.slow
def test_lm_choices_on_a_folder_of_one_mixed_log_and_on_a_log_of_one_count(cli, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / MIXED.name).write_bytes(MIXED.read_bytes())
    a = cli("threshold", folder, "--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    b = cli("threshold", MIXED, "--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert a.exit_code == 0 and a.stdout == b.stdout
    k = read_dump(SINGLE).logits.shape[1]  # a log of one count takes its own count
    same = cli("threshold", SINGLE, "--lm-choices", str(k), "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    plain = cli("threshold", SINGLE, "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert same.exit_code == 0 and same.stdout == plain.stdout


def test_a_mixed_log_without_lm_choices_is_the_readers_refusal(cli):
    line = one_error_line(cli("threshold", MIXED), str(MIXED), "column 'filtered_resps', line 5",
                             "3, 4, 5 choices")
    try:
        read_dump(MIXED)
    except selcal.SelcalError as exc:
        assert line == f"selcal: error: {exc}"  # the same line as reading it directly


def test_lm_choices_that_the_log_lacks_is_one_line(cli):
    one_error_line(cli("threshold", MIXED, "--lm-choices", "7"), str(MIXED),
                      "has no question of 7 choices (it has 3, 4, 5); give --lm-choices one of them")


def test_lm_choices_on_a_file_that_is_no_log_is_refused(cli, dumps):
    logits = np.random.default_rng(0).normal(size=(200, 4))
    path = dumps.parquet("m.parquet", logits, logits.argmax(axis=1))
    one_error_line(cli("threshold", path, "--lm-choices", "4"), str(path), "--lm-choices is for "
                      "lm-evaluation-harness sample logs", "leave out --lm-choices")
    with pytest.raises(selcal.SelcalError, match="lm_choices is for lm-evaluation-harness"):
        selcal.threshold(str(path), lm_choices=4)



def test_lm_norm_reads_the_log_as_evaluate_does(cli, dumps):
    args = ("--lm-choices", "4", "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    normed = cli("threshold", MIXED, "--lm-norm", "chars", *args)
    assert normed.exit_code == 0, normed.stderr
    direct = threshold_dump(read_dump(MIXED, lm_choices=4, lm_norm="chars"), risk=0.3,
                            options=selcal.Options(val_fraction=0.5))
    assert strict_json(normed.stdout) == strict_json(direct.to_json())
    raw = threshold_dump(read_dump(MIXED, lm_choices=4), risk=0.3, options=selcal.Options(val_fraction=0.5))
    assert direct.calibration_curve.thresholds.tolist() != raw.calibration_curve.thresholds.tolist()
    one_error_line(cli("threshold", MIXED, "--lm-norm", "words", *args), "--lm-norm must be one of none, chars, bytes")
    logits = np.random.default_rng(0).normal(size=(200, 4))
    path = dumps.parquet("m.parquet", logits, logits.argmax(axis=1))
    one_error_line(cli("threshold", path, "--lm-norm", "chars"), str(path), "--lm-norm is for "
                      "lm-evaluation-harness sample logs", "leave out --lm-norm")


# ------------------------------------------------------------------ files of confidences (no logits)
def _confidence_file(dumps, name, confidence, pred, label, **more):
    import pyarrow as pa

    columns = {"confidence": pa.array(np.asarray(confidence, dtype=np.float64)), "pred": pa.array(pred),
               "label": pa.array(label), **{k: pa.array(v) for k, v in more.items()}}
    return dumps.table(name, columns)


def _hand_worked(dumps):
    """50 calibration rows ('val'), every one right, confidences 0.30, 0.31, ..., 0.79; 4 evaluation
    rows ('test') of confidence 0.1 (wrong), 0.5 (wrong), 0.9 and 0.95 (right)."""
    cal = 0.30 + 0.01 * np.arange(50)
    confidence = np.concatenate([cal, [0.1, 0.5, 0.9, 0.95]])
    label = np.zeros(54, dtype=np.int64)
    pred = np.zeros(54, dtype=np.int64)
    pred[50:52] = 3  # the two wrong evaluation rows
    split = ["val"] * 50 + ["test"] * 4
    return _confidence_file(dumps, "conf.parquet", confidence, pred, label, split=split)


def test_a_confidence_file_hand_worked_sgr(cli, dumps):
    path = _hand_worked(dumps)
    result = cli("threshold", path, "--risk", "0.2", "--json", "-")
    assert result.exit_code == 0, result.stderr
    answer = strict_json(result.stdout)
    # no error among the 50 calibration rows: SGR runs k = ceil(log2 50) = 6 tests at delta / 6,
    # B*(0, a, 0.1 / 6) = 1 - (1 / 60) ** (1 / a) for a accepted rows; the printed midpoints z = 26, 14,
    # 8, 5, 3, 2 accept a = 50 - z + 1 = 25 (15.1%), 37, 43, 46, 48, 49 (8.02%) rows and all pass 20%:
    # theta is the second-lowest confidence (z = 1 is never tested), coverage 49 / 50
    assert answer["score"] == "confidence" and answer["threshold"] == 0.31
    assert answer["calibration"] == {"n": 50, "coverage": 0.98, "risk": 0.0,
                                     "bound": pytest.approx(1 - (1 / 60) ** (1 / 49), rel=1e-9)}
    # on the evaluation rows 0.5, 0.9 and 0.95 are accepted, 0.5 is wrong
    assert answer["evaluation"] == {"n": 4, "coverage": 0.75, "risk": pytest.approx(1 / 3)}
    # at 10% the first test (25 rows, 15.1%) fails and every test after it accepts fewer rows: abstain
    refused = strict_json(cli("threshold", path, "--risk", "0.1", "--json", "-").stdout)
    assert refused["abstain_all"] is True and refused["threshold"] is None


def test_a_confidence_file_hand_worked_ltt_and_the_sentence(cli, dumps):
    path = _hand_worked(dumps)
    answer = strict_json(cli("threshold", path, "--risk", "0.2", "--method", "ltt", "--json", "-").stdout)
    # LTT: coverage 1% is the first operating point with >= 0.5 rows, the top row: p = 0.8 ** 1 > 0.1 fails
    assert answer["abstain_all"] is True
    text = cli("threshold", path, "--risk", "0.2").stdout
    assert text.startswith("accept confidence >= 0.31 (as stored): 98.0% of new inputs, selective risk at most 20.0% with "
                           "90% confidence (calibration: 50 rows, bound 8.02%); on the 4 evaluation rows: "
                           "coverage 75.0%, risk 33.3%"), text


def test_a_confidence_file_against_the_core_on_its_rows(dumps):
    from selcal.threshold import guarantee

    rng = np.random.default_rng(5)
    n = 3000
    confidence = np.round(rng.random(n) * 200) / 200  # ties on purpose
    label = rng.integers(0, 10, n)
    pred = np.where(rng.random(n) < confidence, label, (label + 1) % 10)
    path = _confidence_file(dumps, "c.parquet", confidence, pred, label)
    result = selcal.threshold(str(path), risk=[0.1, 0.3], method="sgr", val_fraction=0.3, seed=4)
    # the hold-out of evaluate: the lowest identity hashes of the row positions
    from selcal.pipeline.split import holdout_mask

    held = holdout_mask(n, None, 0.3, 4)
    correct = pred == label
    for entry, target in zip(result.entries, (0.1, 0.3)):
        cert = guarantee.sgr(confidence[held], correct[held], risk=target, delta=0.1)
        assert (entry.threshold, entry.certificate.accepted, entry.certificate.errors) == \
            (cert.threshold, cert.accepted, cert.errors)
        ev = guarantee.apply_threshold(confidence[~held], correct[~held], cert.threshold)
        assert (entry.evaluation.n, entry.evaluation.coverage, entry.evaluation.risk) == (ev.n, ev.coverage, ev.risk)
    assert result.split == "holdout" and result.n_fit == 0 and result.probability


def test_another_column_and_a_val_file_of_confidences(cli, dumps):
    rng = np.random.default_rng(6)
    n = 400
    label = rng.integers(0, 5, n)
    margin = rng.normal(size=n) * 3  # not a probability: shown as it is
    pred = np.where(margin + rng.normal(size=n) > 0, label, (label + 1) % 5)
    test = _confidence_file(dumps, "t.parquet", rng.random(n), pred, label, margin=margin)
    val = _confidence_file(dumps, "v.parquet", rng.random(n), pred[::-1], label[::-1], margin=margin[::-1])
    answer = strict_json(cli("threshold", test, "--val", val, "--score-col", "margin", "--risk", "0.3",
                             "--json", "-").stdout)
    assert answer["score"] == "margin" and answer["calibration"]["n"] == n and answer["evaluation"]["n"] == n
    from selcal.threshold import guarantee

    cert = guarantee.sgr(margin[::-1], (pred == label)[::-1], risk=0.3, delta=0.1)
    assert answer["threshold"] == cert.threshold and answer["calibration"]["coverage"] == cert.coverage


@pytest.mark.parametrize("args,parts", [
    (("--score", "msp"), ("holds no logits", "--score msp cannot be computed", "--score-col COLUMN")),
    (("--score", "temp"), ("--score temp cannot be computed",)),
    (("--score-col", "nope"), ("no column 'nope' (columns: confidence, pred, label, split)",
                               "give --score-col one of them")),
    (("--input", "probs"), ("--input has no meaning for a file of confidences", "leave out --input")),
    (("--ood-label", "7"), ("--ood-label has no meaning", "leave out --ood-label")),
])
def test_a_confidence_file_refuses_what_needs_logits_in_one_line(cli, dumps, tmp_path, args, parts):
    path = _hand_worked(dumps)
    out = tmp_path / "answer.json"
    one_error_line(cli("threshold", path, *args, "--json", out), str(path), *parts)
    assert not out.exists()


def test_a_confidence_file_with_a_logits_val_file_or_a_bad_value_is_one_line(cli, dumps):
    path = _hand_worked(dumps)
    logits = np.random.default_rng(0).normal(size=(100, 4))
    val = dumps.parquet("logits.parquet", logits, logits.argmax(axis=1))
    one_error_line(cli("threshold", path, "--val", val), str(val), "holds logits", "give a --val file of confidences")
    one_error_line(cli("threshold", val, "--score-col", "confidence"), str(val),
                      "--score-col is for a file of confidences", "--score")
    confidence = np.full(60, 0.5)
    confidence[41] = np.nan
    bad = _confidence_file(dumps, "nan.parquet", confidence, np.zeros(60, np.int64), np.zeros(60, np.int64))
    one_error_line(cli("threshold", bad), str(bad), "column 'confidence', row 41")


def test_too_few_calibration_rows_of_confidences(cli, dumps):
    path = _confidence_file(dumps, "few.parquet", np.linspace(0, 1, 50), np.zeros(50, np.int64),
                            np.zeros(50, np.int64), split=["val"] * 20 + ["test"] * 30)
    one_error_line(cli("threshold", path), "20 calibration rows cannot certify", "at least 83")


# ------------------------------------------------------------------ streamed by row chunks: the same bits
def _assert_identical(a, b, where="result"):
    """Every field of two results equal, bit for bit (arrays by their bytes, floats by their bits)."""
    import dataclasses

    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _assert_identical(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _assert_identical(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, float):
        assert isinstance(b, float) and np.float64(a).tobytes() == np.float64(b).tobytes(), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _streamed_and_whole(path, **kwargs):
    """The threshold of ``path`` read whole, and streamed in chunks of 37 rows (many chunks, a last
    partial one), and a check that the file is streamed by default under a tiny memory budget."""
    import selcal.threshold.run as run

    whole = selcal.threshold(str(path), stream=False, **kwargs)
    streamed = selcal.threshold(str(path), stream=True, chunk_rows=37, **kwargs)
    calls = []
    original = run.threshold_source
    run.threshold_source = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        by_budget = selcal.threshold(str(path), memory_budget=1, **kwargs)
    finally:
        run.threshold_source = original
    assert calls == [1]
    return whole, streamed, by_budget


def _model(n=2400, k=6, seed=11):
    """Logits whose confidence tells errors apart (a useful MSP)."""
    rng = np.random.default_rng(seed)
    margin = rng.exponential(2.0, size=n)
    pred = rng.integers(0, k, size=n)
    logits = rng.normal(0.0, 0.5, size=(n, k))
    logits[np.arange(n), pred] += margin
    labels = np.where(rng.random(n) < 0.6 * np.exp(-margin), (pred + 1) % k, pred)
    return logits, labels


@pytest.mark.parametrize("score", ["msp", "temp", "max_logit", "pnorm", "vector"])
@pytest.mark.parametrize("layout", ["holdout", "split", "ids"])
def test_a_streamed_file_gives_the_bits_of_the_file_read_whole(dumps, score, layout):
    import pyarrow as pa

    logits, labels = _model()
    extra = {}
    if layout == "ids":
        extra["id"] = pa.array([f"row-{i * 7919 % 2400}" for i in range(2400)])
    split = (["val", "test", "test"] * 800) if layout == "split" else None
    path = dumps.parquet("m.parquet", logits, labels, split=split, extra=extra, row_group_size=500)
    whole, streamed, by_budget = _streamed_and_whole(path, score=score, risk=[0.05, 0.2], seed=3)
    _assert_identical(whole, streamed)
    _assert_identical(whole, by_budget)
    assert whole.entries[1].threshold is not None


@pytest.mark.slow
def test_streamed_with_a_val_file_counts_the_shared_rows_as_read_whole(dumps):
    logits, labels = _model(seed=12)
    test = dumps.parquet("test.parquet", logits[:1500], labels[:1500])
    val = dumps.parquet("val.parquet", np.concatenate([logits[1500:], logits[:40]]),
                        np.concatenate([labels[1500:], labels[:40]]))  # 40 TEST rows leak into --val
    for score in ("msp", "temp"):
        whole, streamed, by_budget = _streamed_and_whole(test, val=str(val), score=score, risk=0.2)
        _assert_identical(whole, streamed)
        _assert_identical(whole, by_budget)
        assert any("40 evaluation rows are also validation rows" in w for w in whole.warnings)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["binary", "probabilities", "ood", "ignored"])
def test_streamed_special_rows_give_the_bits_of_the_file_read_whole(dumps, case):
    logits, labels = _model(seed=13)
    kwargs = {}
    if case == "binary":  # one logit per row
        margin = logits[:, 0] - logits[:, 1]
        logits, labels = margin[:, None], (margin + np.random.default_rng(1).normal(size=margin.size) > 0).astype(int)
    elif case == "probabilities":
        logits = np.exp(logits - logits.max(axis=1, keepdims=True))
        logits /= logits.sum(axis=1, keepdims=True)
    elif case == "ood":
        labels = labels.copy()
        labels[::9] = 99
        kwargs["ood_label"] = 99
    else:
        labels = labels.copy()
        labels[::5] = 255
        kwargs["ignore_label"] = 255
    path = dumps.parquet("m.parquet", logits, labels, row_group_size=300)
    for score in ("msp", "temp"):
        whole, streamed, by_budget = _streamed_and_whole(path, score=score, risk=0.2, **kwargs)
        _assert_identical(whole, streamed)
        _assert_identical(whole, by_budget)


@pytest.mark.slow
def test_streamed_pixel_rows_and_a_harness_log_give_the_bits_read_whole():
    root = SAMPLES
    for score in ("msp", "temp"):
        whole, streamed, _ = _streamed_and_whole(root / "seg_alpha0", score=score, risk=0.1)
        _assert_identical(whole, streamed)
        assert any("pixels of images" in w for w in streamed.warnings)
    whole, streamed, _ = _streamed_and_whole(MIXED, lm_choices=4, risk=0.3, val_fraction=0.5)
    _assert_identical(whole, streamed)


def test_a_streamed_file_holds_only_the_fit_rows_in_memory(dumps, monkeypatch):
    """The streamed path never reads the file whole: only the fit half of the validation rows is
    gathered (none for a score without a fit), every other row comes by chunks."""
    import selcal.io.base as base
    import selcal.pipeline.stream as stream

    logits, labels = _model(seed=14)
    path = dumps.parquet("m.parquet", logits, labels, row_group_size=300)
    monkeypatch.setattr(base.DumpSource, "read_all", lambda self: pytest.fail("read whole"))
    gathered = []
    original = stream.gather_rows
    monkeypatch.setattr(stream, "gather_rows", lambda source, mask: gathered.append(int(mask.sum()))
                        or original(source, mask))
    selcal.threshold(str(path), score="msp", stream=True)
    assert gathered == []
    result = selcal.threshold(str(path), score="temp", stream=True)
    assert gathered == [result.n_fit] and result.n_fit == 240  # half of the 480 validation rows


@pytest.fixture
def probability_dumps(dumps):
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(3000, 5)) * 2.5
    labels = np.where(rng.random(3000) < 0.05, rng.integers(0, 5, 3000), logits.argmax(1))
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    split = np.array(["val"] * 1000 + ["test"] * 2000)
    return (dumps.npz("logits.npz", logits, labels, split=split, dtype="float64"),
            dumps.npz("probs.npz", probs, labels, split=split, dtype="float64"))


@pytest.mark.parametrize("score", ["max_logit", "pnorm", "energy"])
def test_threshold_never_computes_a_raw_logit_score_on_probabilities(cli, probability_dumps, score):
    """evaluate leaves max_logit/pnorm/energy out on probabilities (issue 24); threshold certified a
    threshold of max_logit on log p with a warning and exit 0."""
    _, probs = probability_dumps
    result = cli("threshold", probs, "--score", score)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == (f"selcal: error: {probs}: holds probabilities, and {score} needs raw "
                                            "logits; choose a score that does not (e.g. --score msp or --score temp)")


@pytest.mark.parametrize("score", ["msp", "temp"])
def test_threshold_on_probabilities_equals_the_logits_and_warns_of_nothing(cli, probability_dumps, score):
    """The softmax scores' thresholds on the probabilities are those of the logits they came from; the
    'logits look like log-probabilities' warning (evaluate no longer prints it there) is not printed."""
    logits, probs = probability_dumps
    answers = []
    for path in (logits, probs):
        result = cli("threshold", path, "--score", score, "--risk", "0.2", "--json", "-")
        assert result.exit_code == 0, result.stderr
        answers.append(strict_json(result.stdout))
    assert "log-probabilities" not in result.stderr and result.stderr == ""
    a, b = answers
    assert a["calibration"] == pytest.approx(b["calibration"]) and a["evaluation"] == pytest.approx(b["evaluation"])
    assert a["threshold"] is not None and a["threshold"] == pytest.approx(b["threshold"], rel=1e-6)


def test_threshold_takes_the_ood_label_its_own_refusal_names(cli, dumps):
    """A label outside 0..K-1 is refused with 'use ... --ood-label for rows of no class'; threshold had
    no --ood-label (nor --input), so the advice ended in 'No such option'. Rows of no class are errors
    wherever they are accepted."""
    rng = np.random.default_rng(5)
    n, k = 3000, 4
    logits = rng.normal(size=(n, k)) * 3
    labels = logits.argmax(1)
    labels[rng.random(n) < 0.05] = k  # out of distribution
    split = np.array(["val"] * 1000 + ["test"] * 2000)
    path = dumps.npz("shift.npz", logits, labels, split=split, dtype="float64")
    refused = cli("threshold", path)
    assert refused.exit_code == 2 and "--ood-label" in refused.stderr
    result = cli("threshold", path, "--ood-label", k, "--risk", "0.1", "--json", "-")
    assert result.exit_code == 0, result.stderr
    answer = strict_json(result.stdout)
    z = logits - logits.max(1, keepdims=True)
    msp = 1.0 / np.exp(z).sum(1)
    wrong = logits.argmax(1) != labels  # a row of no class is never right
    test = split == "test"
    accepted = test & (msp >= answer["threshold"])
    assert answer["evaluation"]["n"] == 2000
    assert answer["evaluation"]["coverage"] == pytest.approx(accepted.sum() / 2000)
    assert answer["evaluation"]["risk"] == pytest.approx(wrong[accepted].mean())
    forced = cli("threshold", path, "--ood-label", k, "--input", "probs")
    assert forced.exit_code == 2 and forced.stderr.startswith("selcal: error:")


def test_threshold_reads_an_lm_eval_folder_of_one_log_and_names_the_models_of_several(cli, tmp_path):
    """A folder of lm-evaluation-harness logs (what evaluate reads as one model per log) was 'a folder
    with no dump in it'; a folder of one log is one model, several are named in the refusal."""
    import shutil

    logs = SAMPLES / "lm_eval" / "synthetic__llm-large"
    one = tmp_path / "llm"
    one.mkdir()
    shutil.copy(logs / "samples_mmlu_synth_2026-11-25T14-00-00.000000.jsonl", one)
    result = cli("threshold", one, "--risk", "0.3", "--val-fraction", "0.5", "--json", "-")
    assert result.exit_code == 0, result.stderr
    assert strict_json(result.stdout)["calibration"]["n"] == 75
    several = cli("threshold", logs)
    assert several.exit_code == 2
    lines = several.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds 4 models" in lines[0] and "mmlu_synth" in lines[0], lines
    assert "no dump" not in lines[0]
