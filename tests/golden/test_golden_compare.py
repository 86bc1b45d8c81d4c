"""The golden comparison itself: exact where the numbers are exact, tolerant only where a fit is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import TOLERANT, differences  # noqa: E402


def _model(score: str, aurc: float, **extra) -> bytes:
    return json.dumps({"models": [{"accuracy": 0.9, "scores": {score: {"aurc": aurc, **extra}}}]}).encode()


def test_the_tolerant_scores_are_the_ones_fitted_by_scipy_optimize():
    assert set(TOLERANT) == {"vector", "dirichlet", "ets"}


def test_an_exact_number_that_moves_in_its_last_digit_is_a_difference():
    assert differences("a.json", _model("msp", 0.1), _model("msp", 0.1 + 2**-56))
    assert differences("a.json", _model("temp", 0.25), _model("temp", 0.25000000000000006))


def test_a_fitted_number_within_its_tolerance_agrees_and_beyond_it_differs():
    assert not differences("a.json", _model("vector", 0.1), _model("vector", 0.1 * (1 + 1e-9)))
    assert differences("a.json", _model("vector", 0.1), _model("vector", 0.1 * (1 + 1e-4)))


def test_a_solver_diagnostic_only_has_to_meet_the_certificate():
    assert not differences("a.json", _model("vector", 0.1, gradient_norm=3e-12, iterations=7),
                           _model("vector", 0.1, gradient_norm=8e-11, iterations=9))
    assert differences("a.json", _model("vector", 0.1, gradient_norm=3e-12),
                       _model("vector", 0.1, gradient_norm=2e-8))


def test_a_changed_key_or_string_is_a_difference_even_under_a_fitted_score():
    assert differences("a.json", _model("vector", 0.1, note="x"), _model("vector", 0.1, note="y"))
    assert differences("a.json", _model("vector", 0.1), _model("vector", 0.1, extra=1.0))


def test_csv_columns_of_fitted_scores_are_tolerant_and_the_others_exact():
    head = "model,aurc_msp,aurc_vector\n"
    assert not differences("b.csv", (head + "m,0.1,0.2\n").encode(), (head + "m,0.1,0.2000000000001\n").encode())
    assert differences("b.csv", (head + "m,0.1,0.2\n").encode(), (head + "m,0.1000000000001,0.2\n").encode())


def test_text_allows_one_unit_of_the_last_digit_only_when_it_names_a_fitted_score():
    assert not differences("t.txt", b"vector | 1.43\n", b"vector | 1.44\n")
    assert differences("t.txt", b"vector | 1.43\n", b"vector | 1.45\n")
    assert differences("t.txt", b"msp | 1.43\n", b"msp | 1.44\n")
    assert differences("t.txt", b"vector | 1.43\n", b"vectors | 1.43\n")
