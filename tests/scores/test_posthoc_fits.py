"""Tests of the post-hoc fits (temperature, p of p-norm) and of the validation split.

Every expected value comes from ``ref_posthoc.py`` (brute force, scipy / np.linalg.norm /
exact rationals, no selcal code) or is worked out by hand in the test.
Real data (``helpers.REALDATA``) is optional: tests that need it skip without it.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from helpers import realdata
from oracles import ref_posthoc as R

from selcal.api import Options, evaluate_arrays, evaluate_dump, holdout_mask, split_rows
from selcal.io import Dump
from selcal.scores import fits as posthoc

def load_real(model: str, split: str):
    """(logits float64, labels int64) of a real dump, or skip when the data is absent."""
    with np.load(realdata(model, f"{split}.npz")) as data:
        return np.asarray(data["logits"], dtype=np.float64), np.asarray(data["labels"], dtype=np.int64)


def sample_labels(rng, logits, sharpness=1.0):
    """Labels drawn from softmax(sharpness * logits): a finite optimal temperature exists."""
    z = sharpness * logits
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(len(p))[:, None]
    return np.minimum((np.cumsum(p, axis=1) < u).sum(axis=1), logits.shape[1] - 1).astype(np.int64)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


# =========================================================================== 1. temperature
def check_temperature_against_reference(logits, labels):
    fit = posthoc.fit_temperature(logits, labels)
    t_ref, nll_ref = R.reference_temperature(logits, labels)
    assert fit.fallback is None, f"unexpected fallback {fit.fallback!r} (reference T = {t_ref:.10g})"
    assert math.isfinite(fit.temperature) and fit.temperature > 0
    assert rel(fit.temperature, t_ref) < 1e-6, f"T = {fit.temperature!r}, brute force T = {t_ref!r}"
    # The solver's stopping rule: |dNLL/dbeta| < 1e-9, as reported and as recomputed independently.
    assert abs(fit.gradient) < 1e-9, f"reported gradient {fit.gradient!r}"
    assert abs(R.nll_gradient_beta(logits, labels, fit.temperature)) < 1e-9
    # NLL before / after: the reference formula at T = 1 and at the reference optimum.
    assert rel(fit.nll_before, R.nll_at_temperature(logits, labels, 1.0)) < 1e-12
    assert fit.nll_after <= fit.nll_before
    assert rel(fit.nll_after, nll_ref) < 1e-12, f"nll_after {fit.nll_after!r} vs reference {nll_ref!r}"
    assert fit.nll_after <= nll_ref * (1 + 1e-14), "the fit is worse than the brute-force optimum"
    return fit, t_ref


def slow_but(cases, fast):
    """``cases`` for parametrize, each but those of ``fast`` marked slow (the fast tier keeps one real model)."""
    return [case if case in fast else pytest.param(*case, marks=pytest.mark.slow) for case in cases]


REAL_TEMPERATURE_CASES = [
    ("markus93_densenet40_c10", "val"),
    ("calibrator_cifar10_resnet50_ce", "val"),
    ("sctl_cifar10lt_resnet110", "val"),
    ("noisycal_ham10000", "val"),
    ("wasscal_cifar100_playground_cnn", "test"),  # |logits| up to 80, K = 100
    ("netcal_densenetbc100c100", "test"),  # log-probabilities (top class often exactly 0)
]


@pytest.mark.parametrize("model,split", slow_but(REAL_TEMPERATURE_CASES, [("noisycal_ham10000", "val")]))
def test_temperature_matches_brute_force_on_real_data(model, split):
    logits, labels = load_real(model, split)
    check_temperature_against_reference(logits, labels)


@pytest.mark.parametrize("scale", [1e3, 1e4])
def test_temperature_on_real_logits_scaled_up(scale):
    """NLL(c v, T) = NLL(v, T / c): scaling the logits by c scales the fitted T by c."""
    logits, labels = load_real("markus93_densenet40_c10", "val")
    base = posthoc.fit_temperature(logits, labels)
    fit, _ = check_temperature_against_reference(logits * scale, labels)
    assert rel(fit.temperature, scale * base.temperature) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize(
    "seed,n,k,scale",
    [(0, 2000, 10, 1.0), (1, 2000, 10, 1e3), (2, 2000, 10, 1e4), (3, 1500, 100, 1.0), (4, 1500, 100, 1e3),
     (5, 3000, 2, 1.0), (6, 3000, 2, 1e3), (7, 50, 5, 1.0)],
)
def test_temperature_matches_brute_force_on_random_data(seed, n, k, scale):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3.0
    labels = sample_labels(rng, z, sharpness=0.6)  # true T = 1 / 0.6 in units of z
    check_temperature_against_reference(z * scale, labels)


def test_temperature_binary_k2():
    """K = 2: NLL is the logistic loss of the logit difference; brute force on that form too."""
    rng = np.random.default_rng(11)
    d = rng.normal(size=800) * 4.0
    labels = (rng.random(800) < 1 / (1 + np.exp(-0.5 * d))).astype(np.int64)
    logits = np.stack([np.zeros_like(d), d], axis=1)
    fit, t_ref = check_temperature_against_reference(logits, labels)
    # Independent 1-D check: mean log(1 + exp(-(2y-1) d / T)).
    sign = 2 * labels - 1
    logistic = lambda t: math.fsum(np.logaddexp(0.0, -sign * d / t)) / d.size  # noqa: E731
    assert rel(fit.nll_after, logistic(t_ref)) < 1e-12


# =========================================================================== 2. temperature edge cases
def assert_fallback(fit, reason_word):
    assert fit.fallback, f"expected a fallback ({reason_word}), got T = {fit.temperature!r} with no fallback"
    assert isinstance(fit.fallback, str) and reason_word in fit.fallback
    assert fit.temperature == 1.0
    for value in (fit.nll_before, fit.nll_after, fit.gradient):
        assert math.isfinite(value)
    assert fit.nll_after == fit.nll_before


@pytest.mark.parametrize("seed,scale,k", [(0, 1.0, 5), (1, 0.01, 5), (2, 10.0, 3), (3, 1.0, 2)])
def test_temperature_all_correct_falls_back(seed, scale, k):
    """Every validation prediction correct: NLL decreases forever as T -> 0, no finite optimum.

    CONVENTIONS / fit_temperature docstring: T = 1 is kept with fallback "no validation errors".
    """
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(200, k)) * scale
    labels = np.argmax(logits, axis=1)
    fit = posthoc.fit_temperature(logits, labels)
    assert_fallback(fit, "no validation errors")


def test_temperature_all_correct_real_subset_falls_back():
    logits, labels = load_real("markus93_densenet40_c10", "val")
    keep = np.argmax(logits, axis=1) == labels
    assert_fallback(posthoc.fit_temperature(logits[keep], labels[keep]), "no validation errors")


@pytest.mark.parametrize("kind", ["argmin", "anti-sampled", "constant"])
def test_temperature_no_better_than_uniform_falls_back(kind):
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(2000, 6)) * 2
    if kind == "argmin":
        labels = np.argmin(logits, axis=1)
    elif kind == "anti-sampled":
        labels = sample_labels(rng, -logits)  # labels anti-correlated with the logits
    else:
        logits = np.full((40, 6), 3.5)
        labels = rng.integers(0, 6, 40)
    # Reference: the NLL never goes below its beta -> 0 limit log K.
    grid = [R.nll_at_temperature(logits, labels, t) for t in np.logspace(-2, 6, 50)]
    assert min(grid) >= math.log(6) - 1e-9
    assert_fallback(posthoc.fit_temperature(logits, labels), "uniform")


def test_temperature_tiny_validation_set():
    """3 rows, one error: a finite optimum exists and is found."""
    logits = np.array([[2.0, 0.0, -1.0], [1.0, 0.5, 0.0], [0.2, 0.3, -1.0]])
    labels = np.array([0, 0, 0])
    assert (np.argmax(logits, axis=1) == labels).tolist() == [True, True, False]
    fit, _ = check_temperature_against_reference(logits, labels)
    assert 0 < fit.temperature < math.inf


def test_temperature_always_positive_and_finite():
    rng = np.random.default_rng(99)
    for trial in range(60):
        n = int(rng.integers(1, 40))
        k = int(rng.integers(2, 6))
        logits = rng.normal(size=(n, k)) * float(10.0 ** rng.uniform(-3, 3))
        labels = rng.integers(0, k, n)
        fit = posthoc.fit_temperature(logits, labels)
        values = (fit.temperature, fit.nll_before, fit.nll_after, fit.gradient)
        assert all(math.isfinite(v) for v in values), (trial, fit)
        assert fit.temperature > 0, (trial, fit)
        assert fit.nll_after <= fit.nll_before, (trial, fit)


# =========================================================================== 3. p-norm
_keys_cache: dict = {}


def reference_for(logits, labels, key, center, objective, p_grid=tuple(range(1, 11))):
    """ref_posthoc.reference_pnorm, with the exact keys cached across objectives."""
    correct = np.argmax(logits, axis=1) == labels
    cache_key = (key, center)
    if cache_key not in _keys_cache:
        _keys_cache[cache_key] = (
            {p: R.pnorm_exact_keys(logits, p, center) for p in p_grid},
            R.msp_rank_score(logits),
        )
    keys, msp = _keys_cache[cache_key]
    measure = {"aurc": R.brute_aurc, "augrc": R.brute_augrc}[objective]
    values = {p: measure(keys[p], correct) for p in p_grid}
    best = R.choose_p(values)
    msp_value = measure(msp, correct)
    return best, msp_value <= values[best], values, msp_value


def check_pnorm(logits, labels, key, center, objective, p_grid=tuple(range(1, 11))):
    fit = posthoc.fit_pnorm(logits, labels, p_grid, center=center, objective=objective)
    best, fallback, values, msp_value = reference_for(logits, labels, key, center, objective, p_grid)
    assert fit.center is center and fit.objective == objective
    assert set(fit.val_objective) == set(values)
    diffs = {p: fit.val_objective[p] - values[p] for p in values if rel(fit.val_objective[p], values[p]) > 1e-12}
    assert not diffs, (
        f"validation {objective} differs from the exact-rank brute force at p = {sorted(diffs)}: "
        + ", ".join(f"p={p}: selcal {fit.val_objective[p]!r} vs reference {values[p]!r}" for p in sorted(diffs))
    )
    assert rel(fit.val_objective_msp, msp_value) < 1e-12, (fit.val_objective_msp, msp_value)
    assert fit.p == best, (fit.p, best, values)
    assert fit.fallback is fallback, (fit.fallback, fallback, msp_value, values[best])
    return fit


REAL_PNORM_CASES = [
    ("markus93_densenet40_c10", "val"),
    ("calibrator_cifar10_resnet50_ce", "val"),
    ("sctl_cifar10lt_resnet110", "val"),
    ("noisycal_ham10000", "val"),
]


@pytest.mark.parametrize("center", [True, False], ids=["center", "no-center"])
@pytest.mark.parametrize("model,split", slow_but(REAL_PNORM_CASES, [("noisycal_ham10000", "val")]))
def test_pnorm_aurc_matches_grid_loop_on_real_data(model, split, center):
    logits, labels = load_real(model, split)
    check_pnorm(logits, labels, (model, split), center, "aurc")


@pytest.mark.parametrize("center", [True, False], ids=["center", "no-center"])
@pytest.mark.parametrize("model,split", slow_but(REAL_PNORM_CASES[:3:2], []))
def test_pnorm_augrc_matches_grid_loop_on_real_data(model, split, center):
    logits, labels = load_real(model, split)
    check_pnorm(logits, labels, (model, split), center, "augrc")


@pytest.mark.slow
def test_pnorm_on_real_k100_subset():
    logits, labels = load_real("wasscal_cifar100_playground_cnn", "test")
    logits, labels = logits[:2500], labels[:2500]
    check_pnorm(logits, labels, ("wasscal_cifar100_playground_cnn", "test[:2500]"), True, "aurc")
    check_pnorm(logits, labels, ("wasscal_cifar100_playground_cnn", "test[:2500]"), True, "augrc")


def test_reference_pnorm_score_is_the_direct_formula():
    """Self-check of the reference: the exact keys are sign(s)|s|^p of the np.linalg.norm score."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 7)) * 5
    for center in (True, False):
        for p in (1, 2, 3, 7, 10):
            s = R.pnorm_score(logits, p, center)
            keys = R.pnorm_exact_keys(logits, p, center)
            np.testing.assert_allclose(np.sign(s) * np.abs(s) ** p, [float(k) for k in keys], rtol=1e-12)


def quantized_with_tied_copies(seed, n=150, k=10):
    """float16-grid logits (multiples of 1/8 in [-16, 16]) plus, for every row, three copies
    with the same exact score: classes permuted (label moved along), shifted by an integer
    (a tie for centred p-norm and MSP), scaled by a power of two (a tie for p-norm).
    Every shift and scaling is exact in float64."""
    rng = np.random.default_rng(seed)
    base = np.clip(np.round(rng.normal(0.0, 2.5, size=(n, k)) * 8) / 8, -16, 16)
    perm = np.array([rng.permutation(k) for _ in range(n)])
    permuted = np.take_along_axis(base, perm, axis=1)
    shifted = base + rng.integers(-3, 4, size=(n, 1))
    scaled = base * 2.0 ** rng.integers(-2, 3, size=(n, 1))
    labels = np.where(rng.random(n) < 0.7, np.argmax(base, axis=1), rng.integers(0, k, n))
    moved = np.argsort(perm, axis=1)[np.arange(n), labels]
    logits = np.concatenate([base, permuted, shifted, scaled])
    assert np.array_equal(logits.astype(np.float16).astype(np.float64), logits)
    return logits, np.concatenate([labels, moved, labels, labels]).astype(np.int64)


@pytest.mark.parametrize("center", [True, False], ids=["center", "no-center"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pnorm_on_quantized_logits_with_exact_ties(seed, center):
    """Quantized logits (as float16 dumps give) have rows whose scores are exactly equal:
    the copies built above, and unrelated rows with equal ratios (p = 1 uncentred:
    max v / sum |v|, e.g. 2.75 / 15.125 = 4.5 / 24.75 = 2/11). Equal exact scores must form
    one tie group (CONVENTIONS: ties are expected counts, no result depends on order); the
    reference ranks by exact rationals. Note the direct float formula max / sum|v| is exact
    here for p = 1 uncentred (the sum of multiples of 1/8 is exact, then one rounding)."""
    logits, labels = quantized_with_tied_copies(seed)
    check_pnorm(logits, labels, ("float16-grid", seed), center, "aurc")


@pytest.mark.parametrize("model", ["calibrator_cifar10_resnet50_ce", "noisycal_ham10000", "markus93_densenet40_c10"])
def test_pnorm_fit_does_not_depend_on_class_order(model):
    """Relabelling the classes (permuting logit columns and labels alike) changes no score."""
    logits, labels = load_real(model, "val")
    k = logits.shape[1]
    perm = np.random.default_rng(0).permutation(k)
    inverse = np.argsort(perm)
    permuted = logits[:, perm]
    permuted_labels = inverse[labels]
    assert np.array_equal(np.argmax(permuted, axis=1) == permuted_labels, np.argmax(logits, axis=1) == labels)
    a = posthoc.fit_pnorm(logits, labels)
    b = posthoc.fit_pnorm(permuted, permuted_labels)
    changed = {p: (a.val_objective[p], b.val_objective[p]) for p in a.val_objective
               if a.val_objective[p] != b.val_objective[p]}
    assert not changed, f"validation AURC changes with the class order at p = {changed}"
    assert a.val_objective_msp == b.val_objective_msp
    assert (a.p, a.fallback) == (b.p, b.fallback)


def test_pnorm_hand_worked_p2():
    """Four rows, K = 3, all with zero row mean (so centred = uncentred), p = 2.

    row  logits          label  pred  correct  s_2 = max / ||v||_2         MSP
    A    (1, -.5, -.5)   0      0     yes      1/sqrt(1.5)  = 0.8165       0.691
    B    (10, 8, -18)    1      0     no       10/sqrt(488) = 0.4527       0.881
    C    (2, 0, -2)      0      0     yes      2/sqrt(8)    = 0.7071 (tie) 0.867
    D    (1, 0, -1)      2      0     no       1/sqrt(2)    = 0.7071 (tie) 0.665

    p=2 order A, {C, D}, B: E_k = 0, 1/2, 1, 2 -> AURC = (0 + 1/4 + 1/3 + 1/2)/4 = 13/48,
    AUGRC = (0 + 1/2 + 1 + 2)/16 = 7/32.
    MSP order B, C, A, D: E_k = 1, 1, 1, 2 -> AURC = (1 + 1/2 + 1/3 + 1/2)/4 = 7/12,
    AUGRC = 5/16. p-norm is better: no fallback.
    """
    logits = np.array([[1.0, -0.5, -0.5], [10.0, 8.0, -18.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])
    labels = np.array([0, 1, 0, 2])
    for center in (True, False):
        fit = posthoc.fit_pnorm(logits, labels, [2], center=center, objective="aurc")
        assert fit.p == 2 and fit.fallback is False
        assert rel(fit.val_objective[2], 13 / 48) < 1e-15
        assert rel(fit.val_objective_msp, 7 / 12) < 1e-15
        fit = posthoc.fit_pnorm(logits, labels, [2], center=center, objective="augrc")
        assert fit.p == 2 and fit.fallback is False
        assert rel(fit.val_objective[2], 7 / 32) < 1e-15
        assert rel(fit.val_objective_msp, 5 / 16) < 1e-15
    # the reference agrees with the hand computation
    _, _, values, msp_value = R.reference_pnorm(logits, labels, [2])
    assert values[2] == pytest.approx(13 / 48, rel=1e-15) and msp_value == pytest.approx(7 / 12, rel=1e-15)


def test_pnorm_msp_strictly_better_falls_back_and_still_reports_best_p():
    """A (2,-1,-1) y=0 ok; B (1,0,-1) y=1 err; C (2,0,-2) y=0 ok; D (1,1,-2) y=0 ok (pred 0).

    p=2: A .816, {B, C} .707 tie, D .408 -> E = 0, 1/2, 1, 1 -> AURC 5/24.
    MSP: A .909, C .867, B .665, D .488 -> E = 0, 0, 1, 1 -> AURC 7/48 < 5/24: fallback.
    """
    logits = np.array([[2.0, -1.0, -1.0], [1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 1.0, -2.0]])
    labels = np.array([0, 1, 0, 0])
    fit = posthoc.fit_pnorm(logits, labels, [2])
    assert fit.p == 2 and fit.fallback is True
    assert rel(fit.val_objective[2], 5 / 24) < 1e-15 and rel(fit.val_objective_msp, 7 / 48) < 1e-15


def test_pnorm_ties_between_p_go_to_smallest_p():
    """A (1,-.5,-.5) y=0 ok; B (10,8,-18) y=1 err. For every p, s(A) > s(B), so AURC = 1/4 for
    every p; MSP ranks B first: AURC 3/4. Best p = the grid's smallest, no fallback."""
    logits = np.array([[1.0, -0.5, -0.5], [10.0, 8.0, -18.0]])
    labels = np.array([0, 1])
    fit = posthoc.fit_pnorm(logits, labels, (7, 3, 5, 9))
    assert all(v == pytest.approx(0.25, rel=1e-15) for v in fit.val_objective.values())
    assert fit.p == 3 and fit.fallback is False
    assert fit.val_objective_msp == pytest.approx(0.75, rel=1e-15)


def test_pnorm_fallback_when_msp_equal():
    """A (2,-1,-1) y=0 ok; B (1,1,-2) y=2 err: every p and MSP rank A first: all AURC = 1/4.
    MSP's AURC is equal to the best p's, so the score falls back (<=), and p = smallest."""
    logits = np.array([[2.0, -1.0, -1.0], [1.0, 1.0, -2.0]])
    labels = np.array([0, 2])
    for objective in ("aurc", "augrc"):
        fit = posthoc.fit_pnorm(logits, labels, (4, 2, 6), objective=objective)
        assert fit.p == 2
        assert fit.val_objective_msp == fit.val_objective[2]
        assert fit.fallback is True


def test_pnorm_trapz_estimator_shifts_every_value_equally():
    logits, labels = load_real("markus93_densenet40_c10", "val")
    mean = posthoc.fit_pnorm(logits, labels, estimator="mean")
    trapz = posthoc.fit_pnorm(logits, labels, estimator="trapz")
    n = labels.size
    shift = np.count_nonzero(np.argmax(logits, axis=1) != labels) / n / (2 * n)
    for p in mean.val_objective:
        assert trapz.val_objective[p] == pytest.approx(mean.val_objective[p] - shift, rel=1e-12)
    assert trapz.val_objective_msp == pytest.approx(mean.val_objective_msp - shift, rel=1e-12)
    assert (trapz.p, trapz.fallback) == (mean.p, mean.fallback)


# =========================================================================== 4. no leakage
def fitted(result):
    return result.scores["temp"]["temperature"], result.scores["pnorm"]["p"], result.scores["pnorm"]["fallback"]


def test_evaluation_rows_never_change_the_fits_real():
    val_logits, val_labels = load_real("markus93_densenet40_c10", "val")
    test_logits, test_labels = load_real("markus93_densenet40_c10", "test")
    base = evaluate_arrays(test_logits, test_labels, val_logits, val_labels)
    t_direct = posthoc.fit_temperature(val_logits, val_labels).temperature
    p_direct = posthoc.fit_pnorm(val_logits, val_labels)
    assert fitted(base) == (t_direct, p_direct.p, p_direct.fallback)
    rng = np.random.default_rng(0)
    perm = rng.permutation(test_labels.size)
    other = rng.normal(size=(777, 10)) * 7
    variants = {
        "permuted": (test_logits[perm], test_labels[perm]),
        "subset": (test_logits[:1234], test_labels[:1234]),
        "labels changed": (test_logits, (test_labels + 1) % 10),
        "other rows": (other, rng.integers(0, 10, 777)),
        "all correct": (other, np.argmax(other, axis=1)),
    }
    for name, (lg, lb) in variants.items():
        result = evaluate_arrays(lg, lb, val_logits, val_labels)
        assert fitted(result) == fitted(base), name
        assert result.n_val == val_labels.size and result.n_eval == lb.size, name


def test_evaluation_rows_never_change_the_fits_random():
    rng = np.random.default_rng(1)
    val = rng.normal(size=(500, 5)) * 3
    val_labels = sample_labels(rng, val, 0.5)
    results = []
    for seed in range(4):
        r = np.random.default_rng(100 + seed)
        test = r.normal(size=(int(r.integers(10, 300)), 5)) * float(r.uniform(0.1, 50))
        results.append(fitted(evaluate_arrays(test, r.integers(0, 5, len(test)), val, val_labels)))
    assert len(set(results)) == 1, results


def make_dump(logits, labels, split=None, ids=None):
    ids = np.arange(labels.size).astype(str) if ids is None else ids
    return Dump(path="mem.npz", logits=logits, labels=labels, split=split, ids=ids)


@pytest.mark.parametrize("n,fraction", [(1000, 0.2), (5000, 0.2), (7, 0.3), (101, 0.37), (10, 0.9)])
def test_holdout_size_and_disjoint(n, fraction):
    rng = np.random.default_rng(n)
    logits = rng.normal(size=(n, 4))
    labels = rng.integers(0, 4, n)
    mask = holdout_mask(n, np.arange(n).astype(str), fraction, 0)
    assert mask.dtype == bool and mask.shape == (n,)
    assert int(mask.sum()) == round(fraction * n)
    val_rows, eval_rows, rule = split_rows(make_dump(logits, labels), None, Options(val_fraction=fraction))
    assert rule == "holdout"
    val_ids, eval_ids = set(val_rows.ids.tolist()), set(eval_rows.ids.tolist())
    assert not val_ids & eval_ids
    assert val_ids | eval_ids == {str(i) for i in range(n)}
    assert val_ids == {str(i) for i in np.flatnonzero(mask)}


def test_holdout_is_chosen_by_row_identity():
    ids = np.array([f"img/{i:05d}" for i in range(2000)])
    mask = holdout_mask(2000, ids, 0.2, 0)
    assert np.array_equal(mask, holdout_mask(2000, ids, 0.2, 0))  # reproducible
    for s in range(3):  # with ids, independent of row order
        perm = np.random.default_rng(10 + s).permutation(2000)
        assert np.array_equal(holdout_mask(2000, ids[perm], 0.2, 0), mask[perm])
    assert np.array_equal(holdout_mask(2000, None, 0.2, 0), holdout_mask(2000, None, 0.2, 0))
    for rows in (ids, None):
        mask = holdout_mask(2000, rows, 0.2, 0)
        other = holdout_mask(2000, rows, 0.2, 1)
        assert other.sum() == mask.sum()
        assert not np.array_equal(other, mask)
        # different seeds give (nearly) independent subsets: overlap about fraction^2 * N = 80
        assert np.count_nonzero(other & mask) < 200


def test_permuted_dump_gives_identical_fits_and_metrics():
    logits, labels = load_real("calibrator_cifar10_resnet50_ce", "test")
    perm = np.random.default_rng(0).permutation(labels.size)
    ids = np.arange(labels.size).astype(str)
    a = evaluate_dump(make_dump(logits, labels, ids=ids))
    b = evaluate_dump(make_dump(logits[perm], labels[perm], ids=ids[perm]))
    assert a.split == b.split == "holdout"
    assert (a.n_val, a.n_eval) == (b.n_val, b.n_eval) == (2000, 8000)
    assert fitted(a) == fitted(b)
    for score in a.scores:
        for key in ("aurc", "augrc", "auroc"):
            assert a.scores[score][key] == pytest.approx(b.scores[score][key], rel=1e-12), (score, key)


# =========================================================================== 5. same evaluation rows
def assert_same_rows(result, n):
    assert result.n_eval == n
    errors = set()
    for name, curve in result.curves.items():
        assert curve.n == n, name
        assert curve.accepted[-1] == n, name
        errors.add(curve.n_errors)
    assert errors == {round(result.error * n)}
    assert set(result.curves) == set(result.scores)


def test_all_scores_on_the_same_rows_and_msp_unchanged():
    val_logits, val_labels = load_real("sctl_cifar10lt_resnet110", "val")
    test_logits, test_labels = load_real("sctl_cifar10lt_resnet110", "test")
    full = evaluate_arrays(test_logits, test_labels, val_logits, val_labels)
    assert set(full.scores) == {"msp", "max_logit", "pnorm", "temp"}
    assert_same_rows(full, test_labels.size)
    only = evaluate_arrays(test_logits, test_labels, options=Options(scores=("msp",)))
    assert only.n_eval == full.n_eval
    assert only.scores["msp"] == full.scores["msp"]
    for key in ("accuracy", "error", "nll", "brier", "cece"):
        assert getattr(only, key) == getattr(full, key), key


def test_holdout_dump_scores_share_rows_with_msp_only_run():
    logits, labels = load_real("markus93_densenet40_c10", "test")
    full = evaluate_dump(make_dump(logits, labels))
    mask = holdout_mask(labels.size, np.arange(labels.size).astype(str), 0.2, 0)
    assert (full.n_val, full.n_eval) == (mask.sum(), (~mask).sum())
    assert_same_rows(full, int((~mask).sum()))
    only = evaluate_arrays(logits[~mask], labels[~mask], options=Options(scores=("msp",)))
    assert only.scores["msp"] == full.scores["msp"]
    if full.scores["pnorm"]["fallback"]:
        for key, value in only.scores["msp"].items():
            if key in full.scores["pnorm"] and key not in ("ece", "rmsce", "aece", "mce"):
                assert full.scores["pnorm"][key] == value, key


def test_split_column_scores_share_rows_with_msp_only_run():
    val_logits, val_labels = load_real("calibrator_cifar10_resnet50_ce", "val")
    test_logits, test_labels = load_real("calibrator_cifar10_resnet50_ce", "test")
    logits = np.concatenate([test_logits[:3000], val_logits, test_logits[3000:]])
    labels = np.concatenate([test_labels[:3000], val_labels, test_labels[3000:]])
    split = np.array(["test"] * 3000 + ["val"] * val_labels.size + ["test"] * (test_labels.size - 3000), dtype=object)
    full = evaluate_dump(make_dump(logits, labels, split))
    only = evaluate_dump(make_dump(logits, labels, split), options=Options(scores=("msp",)))
    assert full.split == only.split == "split-column"
    assert full.n_eval == only.n_eval == test_labels.size
    assert_same_rows(full, test_labels.size)
    assert only.scores["msp"] == full.scores["msp"]
    direct = evaluate_arrays(test_logits, test_labels, val_logits, val_labels)
    assert fitted(full) == fitted(direct)


# =========================================================================== 6. no NaN
ALLOWED_NULL = {"temperature_fallback", "val_path"}


def walk(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")
    else:
        yield path, value


def _tiny_cases():
    rng = np.random.default_rng(7)
    v = rng.normal(size=(60, 4)) * 2
    pred = np.argmax(v, axis=1)
    return {
        "all correct": (v, pred),
        "all wrong": (v, (pred + 1) % 4),
        "one label class": (v, np.zeros(60, dtype=np.int64)),
        "one row correct": (v[:1], pred[:1]),
        "one row wrong": (v[:1], (pred[:1] + 1) % 4),
        "two rows": (v[:2], np.array([pred[0], (pred[1] + 2) % 4])),
        "three rows one error": (v[:3], np.array([pred[0], pred[1], (pred[2] + 1) % 4])),
        "constant logits": (np.zeros((5, 4)), np.array([0, 1, 2, 3, 0])),
    }


@pytest.mark.parametrize("case", list(_tiny_cases()))
def test_one_class_or_tiny_validation_never_nan(case):
    val_logits, val_labels = _tiny_cases()[case]
    rng = np.random.default_rng(8)
    test = rng.normal(size=(300, 4)) * 2
    test_labels = np.where(rng.random(300) < 0.7, np.argmax(test, axis=1), rng.integers(0, 4, 300))
    result = evaluate_arrays(test, test_labels, val_logits, val_labels)
    # The evaluation rows have both correct and wrong predictions: every metric is defined,
    # so neither the raw result nor its JSON form may hold a NaN (or a null standing for one).
    raw = [(p, v) for p, v in walk(result.scores) if isinstance(v, float) and math.isnan(v)]
    raw += [(k, getattr(result, k)) for k in ("accuracy", "error", "nll", "brier", "cece")
            if math.isnan(getattr(result, k))]
    assert not raw, raw
    d = result.models[0].to_dict()  # evaluate_arrays gives an EvaluationResult
    bad = [(p, v) for p, v in walk(d)
           if (isinstance(v, float) and not math.isfinite(v)) or (v is None and p.rsplit("/", 1)[-1] not in ALLOWED_NULL)]
    assert not bad, bad
    json.dumps(d, allow_nan=False)
    temp, pn = d["scores"]["temp"], d["scores"]["pnorm"]
    assert temp["temperature"] > 0 and math.isfinite(temp["temperature"])
    assert isinstance(pn["p"], int) and isinstance(pn["fallback"], bool)
    assert all(math.isfinite(x) for x in pn["val_objective"].values())


def test_tiny_holdout_through_evaluate_dump_never_nan():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(6, 3))
    labels = np.argmax(logits, axis=1)
    labels[:2] = (labels[:2] + 1) % 3
    result = evaluate_dump(make_dump(logits, labels))
    assert result.n_val == 1 and result.n_eval == 5
    d = result.to_dict()
    json.dumps(d, allow_nan=False)
    bad = [(p, v) for p, v in walk(d) if isinstance(v, float) and math.isnan(v)]
    assert not bad
    assert d["scores"]["temp"]["temperature"] is not None and d["scores"]["pnorm"]["p"] is not None


def test_fraction_sanity():
    """The hand-worked AURC fractions above, recomputed with exact rationals."""
    e = [Fraction(0), Fraction(1, 2), Fraction(1), Fraction(2)]
    assert sum(ek / k for k, ek in enumerate(e, 1)) / 4 == Fraction(13, 48)
    assert sum(e) / 16 == Fraction(7, 32)


# =========================================================================== temperature by AURC
def test_temperature_by_aurc_is_the_best_of_an_explicit_loop_over_the_grid():
    """--temp-objective aurc: T is the grid point (around * 2**(j/8), |j| <= 48) whose MSP has the
    lowest validation AURC, ties to the point nearest the centre; checked with a brute-force AURC."""
    from selcal.scores.fits import fit_temperature_by_aurc

    rng = np.random.default_rng(3)
    n, k = 400, 5
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) * 2.0
    logits[np.arange(n), labels] += rng.gamma(1.5, 1.5, n)
    around = 1.7
    chosen, value = fit_temperature_by_aurc(logits, labels, around)
    correct = logits.argmax(axis=1) == labels
    best = None
    for j in range(-48, 49):
        t = around * 2.0 ** (j / 8)
        shifted = logits / t - (logits / t).max(axis=1, keepdims=True)
        rest = np.exp(shifted)
        rest[np.arange(n), shifted.argmax(axis=1)] = 0.0
        score = -np.array([math.fsum(row) for row in rest])  # ranks exactly like MSP at T
        candidate = (R.brute_aurc(score, correct), abs(j), j, t)
        best = candidate if best is None or candidate[:3] < best[:3] else best
    assert chosen == pytest.approx(best[3], rel=1e-12)
    assert value == pytest.approx(best[0], rel=1e-9)


def test_temperature_objective_aurc_through_the_pipeline(tmp_path):
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(600, 4)) * 2
    labels = rng.integers(0, 4, 600)
    logits[np.arange(600), labels] += 1.5
    result = evaluate_arrays(logits[:400], labels[:400], logits[400:], labels[400:],
                             options=Options(temp_objective="aurc"))
    temp = result.scores["temp"]
    assert temp["objective"] == "aurc" and temp["gradient"] is None
    nll_t = evaluate_arrays(logits[:400], labels[:400], logits[400:], labels[400:]).scores["temp"]["temperature"]
    assert 1 / 64 <= temp["temperature"] / nll_t <= 64


def test_a_gradient_at_zero_that_is_zero_in_exact_arithmetic_keeps_t_one_never_a_negative_t():
    """Found by the fuzz test: on these rows sum_i (mean_k v_ik - v_iy) = 0 exactly (the model is no
    better than uniform), float rounding made dNLL/dbeta at 0 come out at -1.5e-18, and the last
    Newton step crossed beta = 0: T = -1.07e17."""
    from fractions import Fraction

    logits = np.array([[-5.0, -2.5, -15.0, 7.5, 12.5, 12.5, -10.0], [-5.0, 10.0, 7.5, -2.5, 5.0, -2.5, -12.5],
                       [7.5, 2.5, 10.0, 0.0, 10.0, -5.0, -5.0], [-7.5, 2.5, -20.0, 2.5, 5.0, 0.0, -12.5],
                       [2.5, 5.0, 12.5, -7.5, -25.0, 27.5, 2.5], [2.5, -5.0, -0.0, -10.0, -10.0, 12.5, 10.0],
                       [-5.0, -0.0, -10.0, -10.0, 7.5, -17.5, 2.5], [7.5, 2.5, -5.0, 2.5, 0.0, 15.0, -10.0],
                       [-0.0, -0.0, 20.0, -5.0, -12.5, 5.0, -12.5]])
    labels = np.array([6, 3, 0, 4, 3, 5, 6, 6, 1])
    exact = sum(sum(Fraction(v) for v in row) / 7 - Fraction(row[y]) for row, y in zip(logits, labels))
    assert exact == 0
    from selcal.scores.fits import fit_temperature

    fit = fit_temperature(logits, labels)
    assert fit.temperature == 1.0 and fit.fallback == "no better than uniform"
    for scale in (1e-6, 1e-3, 1.0):  # slightly better than uniform (and still some errors): a finite, positive T
        better = logits.copy()
        better[np.arange(9), labels] += scale
        fitted = fit_temperature(better, labels)
        assert fitted.fallback is None and 0 < fitted.temperature < np.inf


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


@pytest.mark.parametrize("true_temperature", [1e-3, 0.3, 1.0, 4.0, 1e3])
def test_temperature_bracket_is_the_first_power_of_two_past_the_root_found_from_t_equal_1(monkeypatch, true_temperature):
    """The Newton bracket is [2**(k-1), 2**k] (beta' = beta * scale) with 2**k the first power of two,
    counting from 1, whose gradient is past the root, as doubling from beta' = 1 finds it; it is
    searched from T = 1, so a model whose T is near 1 needs few gradient evaluations."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 10, size=400)
    logits = rng.normal(size=(400, 10))
    logits[np.arange(400), labels] += 2.0
    logits /= true_temperature  # the fitted T moves with the scale of the logits
    seen = []
    original = posthoc._ScaledNll.derivatives

    def recording(self, beta):
        seen.append(beta)
        return original(self, beta)

    monkeypatch.setattr(posthoc._ScaledNll, "derivatives", recording)
    fit = posthoc.fit_temperature(logits, labels)
    nll = posthoc._ScaledNll(logits, labels)
    tolerance = posthoc.GRADIENT_TOLERANCE / max(nll.scale, 1.0)
    first = 1.0
    while not original(nll, first)[0] > -tolerance:
        first *= 2.0
    powers = [b for b in seen if math.frexp(b)[0] == 0.5]  # the bracket's evaluations: powers of two
    assert first in powers and first / 2 in powers + [0.5]
    assert fit.fallback is None and nll.scale / (fit.temperature * first) <= 1.0 < 2 * nll.scale / (fit.temperature * first)
    if 0.5 <= fit.temperature <= 2.0:
        assert len(powers) <= 3


def _many_rows(n=20_000, k=20, seed=8, errors=None):
    """n validation rows (at least WARM_START_ROWS: Newton starts from the T of a sixteenth of them)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 3.0
    labels = sample_labels(rng, logits, sharpness=0.6)
    if errors is not None:  # as many wrong rows as asked, the rest right
        labels = np.argmax(logits, axis=1)
        wrong = rng.choice(n, size=errors, replace=False)
        labels[wrong] = (labels[wrong] + 1) % k
    return logits, labels


def test_temperature_from_a_warm_start_matches_brute_force():
    logits, labels = _many_rows()
    assert labels.size >= posthoc.WARM_START_ROWS
    check_temperature_against_reference(logits, labels)


def test_temperature_from_a_warm_start_does_not_depend_on_the_row_order():
    # the sixteenth is chosen by content, so a shuffled file starts Newton at the same point: the same bits
    logits, labels = _many_rows(seed=9)
    order = np.random.default_rng(1).permutation(labels.size)
    fit, shuffled = posthoc.fit_temperature(logits, labels), posthoc.fit_temperature(logits[order], labels[order])
    assert (fit.temperature, fit.gradient, fit.nll_after) == (shuffled.temperature, shuffled.gradient, shuffled.nll_after)
    starts = [posthoc._warm_start(posthoc._ScaledNll(v, y), v, y) for v, y in ((logits, labels), (logits[order], labels[order]))]
    assert starts[0] is not None and starts[0] == starts[1]  # the same rows, so the same start


@pytest.mark.parametrize("errors", [None, 3])
def test_warm_start_and_bracketed_search_find_the_same_temperature_in_fewer_passes(monkeypatch, errors):
    # errors=3: a sixteenth of the rows very likely holds no error, so no warm start: the bracketed search
    logits, labels = _many_rows(seed=10, errors=errors)
    passes = []
    original = posthoc._ScaledNll.derivatives

    def counting(self, beta):
        passes.append(self.n)
        return original(self, beta)

    monkeypatch.setattr(posthoc._ScaledNll, "derivatives", counting)
    warm = posthoc.fit_temperature(logits, labels)
    warm_passes = sum(n for n in passes) / labels.size  # in passes over every row
    passes.clear()
    monkeypatch.setattr(posthoc, "WARM_START_ROWS", 10 ** 9)
    cold = posthoc.fit_temperature(logits, labels)
    cold_passes = sum(n for n in passes) / labels.size
    assert warm.fallback is None and cold.fallback is None
    assert abs(warm.gradient) < 1e-9 and abs(cold.gradient) < 1e-9
    assert rel(warm.temperature, cold.temperature) < 1e-14
    if errors is None:
        assert warm_passes <= 0.7 * cold_passes, (warm_passes, cold_passes)
