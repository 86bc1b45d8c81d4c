"""pNormSoftmax's fit by branch and bound: the same (p, T) as the exhaustive exact grid.

The cells of the grid whose exponentials underflow are first computed with their terms below
e**-700 raised to e**-700 (numpy's fast path) and a bound on each row's error; a cell is computed
exactly only when the lower bound of its AURC does not exceed the best exact AURC. These tests
check each step against a computation written differently: the scores against the public
composition ``log_msp(normalised_logits(v, p), 1 / T)``, the bound against the AURC of orders the
slack allows, and the fit against an exhaustive search with the fit's tie rule.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_selective

from selcal import scores  # noqa: E402
from selcal.metrics.selective import aurc, risk_coverage  # noqa: E402
from selcal.scores import fits  # noqa: E402

T_GRID = fits.PNORM_SOFTMAX_T_GRID


def underflowing_logits(seed: int, n: int = 400, k: int = 100) -> np.ndarray:
    """Logits whose normalised values at the grid's smallest T reach exp's slow band and its zeros."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k)) * rng.uniform(0.2, 30.0, size=(n, 1))
    logits[::7, rng.integers(0, k)] += 50.0
    logits[3] = 1.5  # a constant row
    logits[5] = np.round(logits[5])  # ties on a coarse grid
    return logits


def exhaustive(logits, labels, p_grid, t_grid, center=True, estimator="mean"):
    """The exact AURC of every cell from the public functions, and the cell the fit must choose."""
    correct = np.argmax(logits, axis=1) == labels
    table = {}
    for i, p in enumerate(sorted(p_grid)):
        normalised = scores.normalised_logits(logits, p, center)
        for j, temperature in enumerate(sorted(t_grid)):
            table[i, j] = aurc(risk_coverage(scores.log_msp(normalised, 1.0 / temperature), correct), estimator)
    best = min(table, key=lambda cell: (table[cell], cell))  # lowest AURC, then smallest p, then smallest T
    return table, best


def count_exact_cells(monkeypatch) -> list:
    calls: list = []
    original = fits._pnorm_softmax_cell

    def counted(logits, chunks, p, temperature, center):
        calls.append((p, temperature))
        return original(logits, chunks, p, temperature, center)

    monkeypatch.setattr(fits, "_pnorm_softmax_cell", counted)
    return calls


@pytest.mark.parametrize("seed,center,estimator", [(0, True, "mean"), (1, False, "mean"), (2, True, "trapz")])
def test_the_fit_chooses_the_cell_of_the_exhaustive_exact_grid(seed, center, estimator, monkeypatch):
    bounded = []
    lower_bound = fits._aurc_lower_bound
    monkeypatch.setattr(fits, "_aurc_lower_bound", lambda *a: bounded.append(1) or lower_bound(*a))
    logits = underflowing_logits(seed)
    rng = np.random.default_rng(seed + 10)
    labels = np.where(rng.random(logits.shape[0]) < 0.75, logits.argmax(axis=1), rng.integers(0, 100, logits.shape[0]))
    p_grid = (1, 2, 3, 7, 10)
    table, (i, j) = exhaustive(logits, labels, p_grid, T_GRID, center, estimator)
    fit = fits.fit_pnorm_softmax(logits, labels, p_grid, T_GRID, center=center, estimator=estimator)
    assert (fit.p, fit.temperature) == (sorted(p_grid)[i], sorted(T_GRID)[j])
    assert fit.val_objective == table[i, j]  # the same number, computed the same way
    assert bounded  # some cells went through the bound


def test_a_winning_cell_with_slack_is_computed_exactly(monkeypatch):
    # The errors are the rows of the smallest gap between the two largest normalised logits: the
    # grid's smallest T (every row's sum dominated by its second term, underflowing elsewhere)
    # ranks them last, and the equal AURC of the next T values goes to the smallest T by the tie rule.
    # (K = 60 and p = 5: enough values per row take exp's slow path for the grid to bound the cell.)
    rng = np.random.default_rng(4)
    n, k, p = 300, 60, 5
    logits = rng.standard_normal((n, k)) * 8.0
    logits[np.arange(n), rng.integers(0, k, n)] += rng.uniform(5.0, 40.0, n)
    z = scores.normalised_logits(logits, p)
    ordered = np.sort(z, axis=1)
    gap = ordered[:, -1] - ordered[:, -2]
    pred = logits.argmax(axis=1)
    labels = np.where(gap > np.quantile(gap, 0.3), pred, (pred + 1) % k)
    calls = count_exact_cells(monkeypatch)
    fit = fits.fit_pnorm_softmax(logits, labels, (p,), T_GRID)
    table, (i, j) = exhaustive(logits, labels, (p,), T_GRID)
    assert (fit.p, fit.temperature) == (p, sorted(T_GRID)[j]) and fit.val_objective == table[i, j]
    assert fit.temperature == min(T_GRID)
    assert calls, "no cell with slack was computed exactly: the test no longer reaches that path"
    assert (p, fit.temperature) in calls  # the winner had slack, and was computed exactly before it won


@pytest.mark.slow
def test_cells_that_cannot_win_are_not_computed_exactly(monkeypatch):
    # Logits of a usual classifier: most cells are computed with slack (squares of the exponentials
    # of the T twice as large, or underflowing terms raised), and only the cell that wins (when it
    # had slack) is computed again exactly: every other cell's bound is above the best AURC.
    rng = np.random.default_rng(7)
    n, k = 2000, 100
    labels = rng.integers(0, k, n)
    logits = rng.standard_normal((n, k)) * 2.0
    logits[np.arange(n), labels] += rng.uniform(0.0, 6.0, n)
    calls = count_exact_cells(monkeypatch)
    fit = fits.fit_pnorm_softmax(logits, labels, range(1, 11), T_GRID)
    assert set(calls) <= {(fit.p, fit.temperature)}
    table, (i, j) = exhaustive(logits, labels, range(1, 11), T_GRID)
    assert (fit.p, fit.temperature) == (i + 1, sorted(T_GRID)[j]) and fit.val_objective == table[i, j]


@pytest.mark.parametrize("center,t_grid", [
    (True, (1e-5, 2.0 ** -10, 2.0 ** -9.5, 0.01, 0.3, 4.0)),  # no T twice another: no squares
    (False, (1e-5, 2.0 ** -10, 2.0 ** -9.5, 0.01, 0.3, 4.0)),
    (True, T_GRID),  # the fit's grid: chains of squares, restarted with an exp every _SQUARINGS
    (False, T_GRID),
])
def test_grid_scores_with_slack_are_exact_where_it_is_zero_and_within_it_elsewhere(center, t_grid):
    logits = underflowing_logits(11, n=160)
    ps, t_grid = (1, 2, 3, 7, 10, 65), tuple(sorted(t_grid))
    out, slack = np.empty((len(ps), len(t_grid), logits.shape[0])), np.empty((len(ps), len(t_grid), logits.shape[0]))
    fits._pnorm_softmax_grid(logits, ps, t_grid, center, out, slack)
    assert (slack > 0).any() and (slack == 0).any()
    for i, p in enumerate(ps):
        normalised = scores.normalised_logits(logits, p, center)
        for j, temperature in enumerate(t_grid):
            want = scores.log_msp(normalised, 1.0 / temperature)
            exact_rows = slack[i, j] == 0
            assert out[i, j][exact_rows].tobytes() == want[exact_rows].tobytes(), (p, temperature)
            assert (np.abs(out[i, j] - want) <= slack[i, j]).all(), (p, temperature)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 60), st.sampled_from(["mean", "trapz"]))
def test_the_lower_bound_is_at_most_the_aurc_of_every_order_the_slack_allows(seed, n, estimator):
    rng = np.random.default_rng(seed)
    score = np.round(rng.normal(size=n), int(rng.integers(0, 3)))  # ties
    slack = np.where(rng.random(n) < 0.5, 0.0, rng.exponential(rng.choice([1e-3, 0.1, 1.0]), n))
    correct = rng.random(n) < rng.uniform(0.1, 0.9)
    bound = fits._aurc_lower_bound(score, slack, correct, estimator)
    for _ in range(20):
        true = score + slack * rng.uniform(-1.0, 1.0, n)
        true = np.where(rng.random(n) < 0.2, score + slack * rng.choice([-1.0, 1.0], n), true)  # the ends
        assert bound <= aurc(risk_coverage(true, correct), estimator) + 1e-12
    # the worst case the bound stands for: each error as late as the slack allows, the others early
    latest = np.where(correct, score + slack, score - slack)
    assert bound <= ref_selective.aurc_by_thresholds(latest, correct) - (
        (~correct).sum() / n / (2 * n) if estimator == "trapz" else 0.0) + 1e-12


def test_the_lower_bound_is_the_aurc_without_slack_or_ties():
    rng = np.random.default_rng(3)
    score, correct = rng.normal(size=500), rng.random(500) < 0.7
    for estimator in ("mean", "trapz"):
        assert fits._aurc_lower_bound(score, np.zeros(500), correct, estimator) == pytest.approx(
            aurc(risk_coverage(score, correct), estimator), rel=1e-12)


def test_numpys_exp_is_within_the_units_in_the_last_place_the_slack_assumes():
    # _squared_slack takes numpy's float64 exp within _EXP_ULPS units of exp; measured against Python's
    # correctly rounded decimal exp on the arguments the grid meets ([-700, 0]), it is within 1 here.
    import decimal

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-700.0, 0.0, 3000), -rng.exponential(1.0, 2000), [0.0, -1e-300, -700.0]])
    got = np.exp(x)
    decimal.getcontext().prec = 40
    want = np.array([float(decimal.Decimal(float(v)).exp()) for v in x])
    ulps = np.abs(got - want) / np.spacing(want)
    assert ulps.max() <= 1 <= fits._EXP_ULPS
