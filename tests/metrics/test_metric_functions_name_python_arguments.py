"""The Python functions of arrays (selcal.metrics.*, selcal.evaluate_arrays) name their own arguments in
a refusal of probabilities (``input_kind='probs'``, ``scores='msp,temp'``), not the command line's
flags (``--input probs``), which a Python user cannot pass; the command line keeps its flags."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import selcal
from selcal import metrics
from selcal.errors import SelcalError

LABELS = np.array([0, 1, 1, 0])
NOT_PROBS = np.array([[0.5, 0.6], [0.2, 0.8], [0.3, 0.7], [0.9, 0.1]])


def refused(call) -> str:
    with pytest.raises(SelcalError) as error:
        call()
    text = str(error.value)
    assert "--" not in text, text
    return text


@pytest.mark.parametrize("function", ["ece", "aurc", "nll", "brier"])
def test_a_row_that_is_no_probabilities_names_input_kind(function):
    text = refused(lambda: getattr(metrics, function)(LABELS, NOT_PROBS, input_kind="probs"))
    assert text == ("y_pred: row 0: is not a row of probabilities (each in [0, 1], summing to 1 within 1e-3), but "
                    "input_kind='probs' was given; fix the row, or pass input_kind='logits'")


def test_log_probabilities_and_one_column_name_input_kind():
    assert refused(lambda: metrics.ece(LABELS, NOT_PROBS, input_kind="logprobs")).endswith(
        "but input_kind='logprobs' was given; fix the row, or pass input_kind='logits'")
    assert refused(lambda: metrics.ece(LABELS, np.array([0.5, 1.2, 0.3, 0.1]), input_kind="probs")) == (
        "y_pred: row 1: holds 1.2, not a probability of class 1 (input_kind='probs'); pass input_kind='logits' to "
        "read it as a logit")


def test_evaluate_arrays_names_its_arguments():
    assert refused(lambda: selcal.evaluate_arrays(NOT_PROBS, LABELS, input_kind="probs", scores="msp")).endswith(
        "but input_kind='probs' was given; fix the row, or pass input_kind='logits'")
    probs = np.array([[0.5, 0.5], [0.2, 0.8], [0.3, 0.7], [0.9, 0.1]])
    assert refused(lambda: selcal.evaluate_arrays(probs, LABELS, scores="max_logit")) == (
        "logits: holds probabilities, and max_logit needs raw logits; choose scores that do not (e.g. "
        "scores='msp,temp'), or pass input_kind='logits'")


@pytest.mark.slow
def test_the_command_line_keeps_its_flags(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("label,logit_0,logit_1\n" + "".join(f"{y},{a},{b}\n" for y, (a, b) in zip(LABELS, NOT_PROBS)))
    done = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate", str(path), "--input", "probs",
                           "--scores", "msp"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("but --input probs was given; fix the row, or pass --input logits")
