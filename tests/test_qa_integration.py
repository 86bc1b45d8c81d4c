"""QA of the integrated main: where separately built features meet (threshold, the score registry,
the readers, the figures), tried as a researcher and as an adversary would. Each test failed on the
main it was written against."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import strict_json

from selcal.threshold import guarantee
from selcal.threshold.run import _confidence, _target


# ------------------------------------------------------------------ threshold: extreme targets
def _brute_minimum_rows(risk, delta, method):
    """The fewest rows m, counted up from 1, whose error-free calibration set is certified (SGR:
    tested at delta / ceil(log2 m), the count of its tests on m rows)."""
    m = 1
    while True:
        if method == "ltt":
            if (1 - risk) ** m <= delta:
                return m
        elif guarantee.binomial_upper_bound(0, m, delta / max(1, math.ceil(math.log2(m)))) < risk:
            return m
        m += 1


@pytest.mark.parametrize("risk,delta", [(0.5, 0.25), (0.2, 0.1), (0.05, 0.1), (0.01, 0.05), (0.3, 1e-6)])
@pytest.mark.parametrize("method", ["sgr", "ltt"])
def test_minimum_rows_is_the_first_certified_count(risk, delta, method):
    assert guarantee.minimum_rows(risk, delta, method) == _brute_minimum_rows(risk, delta, method)


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
    assert _target(1e-300) == "1e-298%" and _target(0.05) == "5.0%" and _target(0.0001) == "0.01%"
    assert _confidence(1e-5) == "99.999%" and _confidence(0.1) == "90%"
    assert _confidence(1e-300) == "(1 - 1e-300)"


# ------------------------------------------------------------------ threshold: tiny validation sets
@pytest.mark.parametrize("score", ["temp", "pnorm", "pnorm_softmax"])
def test_one_validation_row_for_a_fitted_score_is_named_as_such(cli, dumps, score):
    """It read 'test.npz: a random hold-out of 0.5 x 1 rows ...; give ... --val FILE' to a user who gave
    --val: the fit/calibration halving spoke as evaluate's hold-out and named the wrong file."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 4)) * 3
    labels = logits.argmax(1)
    test = dumps.npz("test.npz", logits, labels)
    val = dumps.npz("val.npz", logits[:1], labels[:1])
    result = cli("threshold", test, "--val", val, "--score", score, "--risk", "0.3")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"selcal: error: {val}: 1 validation row cannot be halved"), lines
    assert "hold-out" not in lines[0]


# ------------------------------------------------------------------ Ctrl-C where Python drops exceptions
_SIGNAL_IN_A_FINALIZER = '''
import os, signal, sys, time, weakref
import selcal.cli as cli

class Thing:
    pass

def app(standalone_mode=False, **kwargs):  # selcal.cli.run passes prog_name too
    thing = Thing()
    def callback(ref):  # the handler runs at the next line, here, where Python drops what it raises
        os.kill(os.getpid(), signal.SIG{name})
        for _ in range(1000):
            pass
    ref = weakref.ref(thing, callback)
    del thing
    start = time.time()
    while time.time() - start < 3:
        pass
    print("finished")
    return 0

cli.app = app
cli.run()
'''


@pytest.mark.parametrize("name,code,line", [("INT", 130, "selcal: aborted"), ("TERM", 143, "selcal: terminated")])
def test_a_signal_that_lands_in_a_finalizer_still_ends_the_run(name, code, line):
    """Ctrl-C during 'selcal evaluate --plots --report' (4 models, at 7 s) printed 'Exception ignored in
    ... _weakrefset.py ... selcal.cli._Signalled: 2', then wrote every output and exited 0: the signal
    handler had raised inside a weakref callback, where Python drops exceptions."""
    run = subprocess.run([sys.executable, "-c", _SIGNAL_IN_A_FINALIZER.replace("{name}", name)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == code, (run.stdout, run.stderr)
    assert "finished" not in run.stdout
    assert run.stderr.strip() == line, run.stderr


# ------------------------------------------------------------------ threshold on saved probabilities
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


# ------------------------------------------------------------------ threshold reads what evaluate reads
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
    from pathlib import Path
    import shutil

    logs = Path(__file__).resolve().parent.parent / "sample_logits" / "lm_eval" / "synthetic__llm-large"
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
