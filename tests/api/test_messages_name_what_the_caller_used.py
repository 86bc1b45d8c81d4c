"""A file read by the Python API (``selcal.evaluate(path, input_kind=...)``, ``selcal.threshold``) is refused
naming the Python arguments (``input_kind='probs'``, ``scores='msp,temp'``), which is what its caller passed;
the same file on the command line names the flags (``--input probs``, ``--scores msp,temp``). The face is the
caller's, whatever ran before in the process (a command run in-process leaves the Python face as it was)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import one_error_line

import selcal
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
