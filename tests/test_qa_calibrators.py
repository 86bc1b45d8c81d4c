"""The calibrators (vector, dirichlet, ets, isotonic) used as a user and as an adversary would.

Each test is a case that failed before its fix: a traceback, a refusal that came after minutes of
work, a silent loss of accuracy, a warning of numpy on stderr.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import selcal
from selcal.cli import app
from selcal.scores import REGISTRY

pytestmark = pytest.mark.skipif("vector" not in REGISTRY, reason="the calibrators are not registry scores yet")


def _data(n: int, k: int, seed: int, shift: float = 2.0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += shift
    return logits, labels


def _save(path, logits, labels):
    np.savez(path, logits=logits.astype(np.float32), labels=labels)
    return str(path)


def test_ets_is_fitted_when_temperature_keeps_one(tmp_path):
    """Validation rows all correct: temp keeps T = 1, so softmax(v / T) and softmax(v) are the same
    component of the mixture; the fit must still give the optimum, not a singular-matrix traceback."""
    test = _save(tmp_path / "test.npz", *_data(600, 10, 0))
    val = _save(tmp_path / "val.npz", *_data(300, 10, 1, shift=8.0))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["evaluate", test, "--val", val, "--scores", "msp,temp,ets", "--json", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    import json

    scores = json.loads(out.read_text())["models"][0]["scores"]
    assert scores["temp"]["temperature"] == 1.0
    assert scores["ets"]["ece"] is not None


def test_ets_at_temperature_one_is_the_best_mixture():
    """fit_ets(v, y, 1.0): two equal components; the optimum of the mixture is found (brute force over the
    simplex's edge w1 + w2 = 1 - w3, the only thing that matters when both are the same)."""
    from selcal.scores.calibrators import fit_ets

    logits, labels = _data(400, 5, 2, shift=1.0)
    fit = fit_ets(logits, labels, 1.0)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    py = p[np.arange(labels.size), labels]
    grid = np.linspace(0.0, 1.0, 20001)
    nll = [-np.mean(np.log((1 - w3) * py + w3 / 5)) for w3 in grid]
    w3 = fit.weights[2] if hasattr(fit, "weights") else fit.w[2]
    assert -np.mean(np.log((1 - w3) * py + w3 / 5)) <= min(nll) + 1e-9


def test_a_class_missing_from_the_validation_rows_is_warned_about():
    """Class 7 has no validation rows: vector, dirichlet and isotonic learn never to predict it, and
    their accuracy drops; the result must say so (not a silent drop)."""
    logits, labels = _data(3000, 10, 0)
    val_logits, val_labels = _data(500, 10, 3)
    keep = val_labels != 7
    result = selcal.evaluate_arrays(logits, labels, val_logits[keep], val_labels[keep],
                                    scores="msp,vector,isotonic")
    assert result.scores["isotonic"]["accuracy"] < result.accuracy - 0.03  # the silent damage
    found = [w for w in result.warnings if "class 7" in w or "classes 7" in w]
    assert len(found) == 1 and "validation" in found[0] and "vector" in found[0] and "isotonic" in found[0], \
        result.warnings


def test_dirichlet_too_large_is_refused_before_any_fit(tmp_path, monkeypatch):
    """K = 1000: dirichlet cannot fit in memory; the refusal must come before minutes of other fits."""
    from selcal.scores import calibrators

    fitted = []
    original = calibrators.fit_vector
    monkeypatch.setattr(calibrators, "fit_vector", lambda *a, **k: fitted.append(1) or original(*a, **k))
    test = _save(tmp_path / "test.npz", *_data(1200, 1000, 0, shift=4.0))
    val = _save(tmp_path / "val.npz", *_data(1100, 1000, 1, shift=4.0))
    result = CliRunner().invoke(app, ["evaluate", test, "--val", val, "--scores", "msp,vector,dirichlet"])
    assert result.exit_code == 2 and "dirichlet" in result.output and "GiB" in result.output, result.output
    assert fitted == []


def test_compare_with_calibrators_prints_no_numpy_warning(tmp_path):
    """isotonic gives probability 0 to some labels (infinite NLL): the bootstrap must not print numpy's
    'invalid value encountered in matmul' (0 x inf) on stderr."""
    a = _save(tmp_path / "a.npz", *_data(800, 10, 0))
    b = _save(tmp_path / "b.npz", *_data(800, 10, 0, shift=2.5))
    val = _save(tmp_path / "val.npz", *_data(60, 10, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = CliRunner().invoke(app, ["compare", a, b, "--val", val, "--val", val, "--scores", "calibrators",
                                          "--bootstrap", "20"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1), result.output
