"""What the outputs say about the scores that read the logits' scale, and about pnorm_softmax's ECE.

- The centred p-norm scores (pnorm, pnorm_softmax) see v - mean(v): log-probabilities are the logits
  shifted per row, so they give the same scores, and the "look like log-probabilities" warning must
  not call them "not meaningful" (it must for --no-center, and for max_logit and energy).
- pnorm_softmax's probabilities are softmax(z / (T ||z||_p)) with T chosen for ranking: confidences
  near 1/K by construction, so an ECE near the accuracy is the right number; the table's note says so.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SAMPLES
from scipy.special import log_softmax
from typer.testing import CliRunner

import selcal
from selcal.cli import app


def _data(n: int = 2000, k: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += 2.0
    return logits, labels


SCORES = "msp,max_logit,pnorm,temp,pnorm_softmax,energy"


def _warning(result) -> str:
    found = [w for w in result.warnings if "log-probabilities" in w]
    assert len(found) == 1, result.warnings
    return found[0]


def test_centred_pnorm_scores_are_called_right_on_log_probabilities():
    logits, labels = _data()
    logp = log_softmax(logits, axis=1)
    on_logp = selcal.evaluate_arrays(logp[:1000], labels[:1000], logp[1000:], labels[1000:], scores=SCORES)
    on_logits = selcal.evaluate_arrays(logits[:1000], labels[:1000], logits[1000:], labels[1000:], scores=SCORES)
    # the truth behind the words: the centred scores rank log-probabilities as they rank the logits
    for name in ("pnorm", "pnorm_softmax"):
        assert on_logp.scores[name]["aurc"] == pytest.approx(on_logits.scores[name]["aurc"], abs=1e-12)
    warning = _warning(on_logp)
    right, _, wrong = warning.partition(" but ")
    assert "pnorm" in right and "pnorm_softmax" in right and "msp" in right and "temp" in right
    assert "max_logit" in wrong and "energy" in wrong and "pnorm" not in wrong


def test_uncentred_pnorm_scores_are_not_meaningful_on_log_probabilities():
    logits, labels = _data()
    logp = log_softmax(logits, axis=1)
    result = selcal.evaluate_arrays(logp[:1000], labels[:1000], logp[1000:], labels[1000:], scores=SCORES,
                                    center=False)
    right, _, wrong = _warning(result).partition(" but ")
    assert "pnorm" in wrong and "pnorm_softmax" in wrong and "max_logit" in wrong
    assert "pnorm" not in right


def test_only_centred_pnorm_chosen_on_log_probabilities_gives_no_wrong_score():
    logits, labels = _data()
    logp = log_softmax(logits, axis=1)
    result = selcal.evaluate_arrays(logp[:1000], labels[:1000], logp[1000:], labels[1000:], scores="msp,pnorm")
    warning = _warning(result)
    assert "msp and pnorm are right" in warning
    assert "not meaningful" in warning  # still names the registered scores that would not be (max_logit, ...)
    assert "pnorm are not" not in warning and ", pnorm" not in warning.partition(" but ")[2]


def test_declared_log_probabilities_keep_the_centred_pnorm_and_leave_out_max_logit(tmp_path):
    logits, labels = _data()
    logp = log_softmax(logits, axis=1)
    path = tmp_path / "logp.npz"
    np.savez(path, logits=logp, labels=labels)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["evaluate", str(path), "--input", "logprobs", "--scores", SCORES,
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    import json

    model = json.loads(out.read_text())["models"][0]
    assert {"pnorm", "pnorm_softmax", "msp", "temp"} <= set(model["scores"])
    assert set(model["not_available"]["scores"]) == {"max_logit", "energy"}


@pytest.mark.slow
def test_pnorm_softmax_ece_is_right_and_explained_where_it_is_shown():
    import pyarrow.parquet as pq

    path = SAMPLES / "calibrator_cifar10_resnet50_ce.parquet"
    result = selcal.evaluate(str(path), scores="msp,pnorm_softmax").models[0]
    s = result.scores["pnorm_softmax"]
    assert not s["fallback"] and s["ece"] > 0.5  # the golden outputs' 79%
    # an independent computation of its ECE on the test rows: softmax(z_c / (T ||z_c||_p))
    table = pq.read_table(path).to_pandas()
    test = table[table["split"] == "test"]
    logits, labels = np.stack(test["logits"].to_numpy()).astype(np.float64), test["label"].to_numpy()
    z = logits - logits.mean(axis=1, keepdims=True)
    z /= np.linalg.norm(z, ord=s["p"], axis=1, keepdims=True) * s["temperature"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    q, correct = p.max(axis=1), p.argmax(axis=1) == labels
    assert q.max() < 0.2  # near uniform by construction: every confidence far below the accuracy
    bins = np.clip(np.ceil(q * 15).astype(int) - 1, 0, 14)
    ece = sum(abs(correct[bins == b].sum() - q[bins == b].sum()) for b in range(15)) / q.size
    assert s["ece"] == pytest.approx(ece, rel=1e-9)
    from selcal.report import fit_notes

    note = [n for n in fit_notes(result) if n.startswith("pnorm_softmax")]
    assert len(note) == 1 and "ranking" in note[0] and "not calibrated" in note[0] and "79.4%" in note[0]
