"""The score registry and the scores beyond the original four (CONVENTIONS.md, "Scores").

Definitions under test, for one row of logits v with softmax p (higher = more confident):

* energy = logsumexp_k v_k;
* entropy = sum_k p_k log p_k (minus the Shannon entropy);
* margin = p_(1) - p_(2); logit_margin = v_(1) - v_(2);
* gini = sum_k p_k^2;
* pnorm_softmax = MSP of z_c / (T ||z_c||_p), z_c = v - mean(v), (p, T) by validation AURC.

Each is checked against a plain Python loop over one row at a time (math.exp, math.fsum:
written differently from the vectorised code), a hand-worked row, and properties.
"""

from __future__ import annotations

import decimal
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ref_selective

from selcal import scores  # noqa: E402
from selcal.api import Options, measure_arrays  # noqa: E402
from selcal.report import LEADERBOARD_COLUMNS, leaderboard  # noqa: E402
from selcal.scores import fits as posthoc  # noqa: E402
from selcal.scores.registry import groups  # noqa: E402

NEW = ("energy", "entropy", "margin", "logit_margin", "gini")


# ------------------------------------------------------------------ brute force, one row at a time
# 60-digit decimal arithmetic: the reference keeps the digits that float64 formulas lose near
# p = 1 (where -H is ~1e-300), so the comparison can be made to 1e-12 relative.
CONTEXT = decimal.Context(prec=60)


def softmax_loop(row):
    """(probabilities, logsumexp) of one row, plain Python in 60-digit decimals."""
    row = [decimal.Decimal(float(v)) for v in row]
    top = max(row)
    weights = [CONTEXT.exp(v - top) for v in row]
    total = CONTEXT.add(sum(weights, decimal.Decimal(0)), 0)
    return [CONTEXT.divide(w, total) for w in weights], top + CONTEXT.ln(total)


def reference(name, row):
    p, lse = softmax_loop(row)
    values = [decimal.Decimal(float(v)) for v in row]
    ordered_p, ordered_v = sorted(p, reverse=True), sorted(values, reverse=True)
    if name == "energy":
        out = lse
    elif name == "entropy":
        out = sum((pk * (v - lse) for pk, v in zip(p, values)), decimal.Decimal(0))  # log p_k = v_k - lse
    elif name == "margin":
        out = ordered_p[0] - ordered_p[1]
    elif name == "logit_margin":
        out = ordered_v[0] - ordered_v[1]
    elif name == "gini":
        out = sum((pk * pk for pk in p), decimal.Decimal(0))
    else:
        raise KeyError(name)
    return float(out)


def compute(name, logits):
    terms = scores.ChunkTerms(np.asarray(logits, dtype=np.float64))
    return scores.REGISTRY[name].score(terms, None)


# ------------------------------------------------------------------ hand-worked row
def test_every_new_score_on_a_hand_worked_row():
    # p = (1/2, 1/4, 1/8, 1/8): the logits log 4, log 2, 0, 0
    row = np.array([[math.log(4), math.log(2), 0.0, 0.0]])
    expected = {
        "energy": math.log(8),
        "entropy": -(0.5 * math.log(2) + 0.25 * math.log(4) + 2 * 0.125 * math.log(8)),  # -1.75 log 2
        "margin": 0.25,
        "logit_margin": math.log(2),
        "gini": 0.25 + 0.0625 + 2 * 0.015625,
    }
    for name, value in expected.items():
        assert compute(name, row)[0] == pytest.approx(value, rel=1e-15, abs=1e-15), name
    assert expected["entropy"] == pytest.approx(-1.75 * math.log(2), rel=1e-15)


def test_a_uniform_row_is_the_least_confident_for_every_new_score():
    uniform, peaked = [0.0, 0.0, 0.0], [5.0, 0.0, 0.0]
    rows = np.array([uniform, peaked])
    assert compute("energy", rows).tolist()[0] == pytest.approx(math.log(3), rel=1e-15)
    assert compute("entropy", rows)[0] == pytest.approx(-math.log(3), rel=1e-15)
    assert compute("margin", rows)[0] == 0.0 and compute("logit_margin", rows)[0] == 0.0
    assert compute("gini", rows)[0] == pytest.approx(1 / 3, rel=1e-15)
    for name in ("entropy", "margin", "logit_margin", "gini"):
        assert compute(name, rows)[1] > compute(name, rows)[0], name


# ------------------------------------------------------------------ brute force
@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2**32 - 1), st.sampled_from([0.1, 3.0, 40.0]))
def test_new_scores_match_a_loop_over_rows(k, seed, spread):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, spread, size=(20, k))
    for name in NEW:
        got = compute(name, logits)
        assert got.dtype == np.float64 and got.shape == (20,)
        want = np.array([reference(name, row) for row in logits])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15, err_msg=name)


def test_no_nan_or_overflow_at_extreme_logits():
    rows = np.array([[0.0, -1e4, -1e4], [1e300, -1e300, 0.0], [1e-300, 0.0, -1e-300], [7.0, 7.0, 7.0]])
    for name in NEW:
        values = compute(name, rows)
        assert np.isfinite(values[[0, 2, 3]]).all(), name
        assert not np.isnan(values).any(), name
    assert compute("entropy", rows)[0] == 0.0  # p = (1, 0, 0) up to exp(-1e4): no log(0)
    assert compute("margin", rows)[0] == 1.0 and compute("gini", rows)[0] == 1.0


# ------------------------------------------------------------------ properties
_grid_rows = st.lists(st.integers(-64, 64), min_size=2, max_size=10).map(lambda v: np.array(v, dtype=np.float64) / 8)


@settings(max_examples=80, deadline=None)
@given(_grid_rows, st.randoms(use_true_random=False))
def test_permuted_rows_get_bit_identical_scores(row, random):
    order = list(range(row.size))
    random.shuffle(order)
    logits = np.stack([row, row[order]])
    for name in NEW:
        values = compute(name, logits)
        assert values[0] == values[1], name


@settings(max_examples=40, deadline=None)
@given(_grid_rows, st.integers(-40, 40))
def test_adding_a_constant_changes_only_energy(row, shift):
    logits = np.stack([row, row + shift])  # logits on a grid of 1/8: the shift is exact
    for name in ("entropy", "margin", "gini", "logit_margin"):
        values = compute(name, logits)
        assert values[1] == pytest.approx(values[0], rel=1e-12, abs=1e-14), name
    energy = compute("energy", logits)
    assert energy[1] - energy[0] == pytest.approx(shift, rel=1e-12, abs=1e-12)


# ------------------------------------------------------------------ pNormSoftmax
def test_normalised_logits_by_hand():
    # centred (2, 0, -2) has ||.||_2 = sqrt(8): (1/sqrt 2, 0, -1/sqrt 2); uncentred (3, 1, -1) / sqrt(11)
    got = scores.normalised_logits(np.array([[3.0, 1.0, -1.0]]), p=2)[0]
    np.testing.assert_allclose(got, [2 ** -0.5, 0.0, -(2 ** -0.5)], rtol=1e-15)
    got = scores.normalised_logits(np.array([[3.0, 1.0, -1.0]]), p=2, center=False)[0]
    np.testing.assert_allclose(got, np.array([3.0, 1.0, -1.0]) / math.sqrt(11), rtol=1e-15)
    assert scores.normalised_logits(np.array([[2.0, 2.0]]), p=3).tolist() == [[0.0, 0.0]]


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 7), st.integers(0, 2**32 - 1), st.sampled_from([1e-3, 1.0, 1e200]))
def test_normalised_logits_match_numpy_norms(k, p, seed, scale):
    logits = np.random.default_rng(seed).normal(size=(10, k)) * scale
    centred = logits - logits.mean(axis=1, keepdims=True)
    want = centred / np.linalg.norm(centred / scale, ord=p, axis=1, keepdims=True) / scale
    np.testing.assert_allclose(scores.normalised_logits(logits, p), want, rtol=1e-10, atol=1e-14)


def pnorm_softmax_loop(row, p, temperature):
    """log MSP of z_c / (T ||z_c||_p), one row, plain Python."""
    mean = math.fsum(row) / len(row)
    centred = [v - mean for v in row]
    norm = math.fsum(abs(x) ** p for x in centred) ** (1.0 / p)
    scaled = [x / (temperature * norm) for x in centred] if norm > 0 else [0.0] * len(row)
    probabilities, _ = softmax_loop(scaled)
    return float(CONTEXT.ln(max(probabilities)))


@pytest.mark.slow
def test_pnorm_softmax_fit_matches_an_explicit_grid_search():
    rng = np.random.default_rng(5)
    n, k = 300, 5
    logits = rng.normal(0.0, 2.0, size=(n, k)) * rng.uniform(0.5, 3.0, size=(n, 1))
    labels = np.where(rng.random(n) < 0.7, logits.argmax(axis=1), rng.integers(0, k, n))
    p_grid, t_grid = (1, 2, 4), (0.05, 0.2, 1.0, 4.0)
    fit = posthoc.fit_pnorm_softmax(logits, labels, p_grid, t_grid)
    correct = logits.argmax(axis=1) == labels
    table = {}
    for p in p_grid:
        for t in t_grid:
            score = np.array([pnorm_softmax_loop(row, p, t) for row in logits])
            table[(p, t)] = ref_selective.aurc_by_thresholds(score, correct)
    best = min(table, key=lambda pt: (round(table[pt], 12), pt))
    assert (fit.p, fit.temperature) == best
    assert fit.val_objective == pytest.approx(table[best], rel=1e-9)
    msp = np.array([float(CONTEXT.ln(max(softmax_loop(row)[0]))) for row in logits])
    assert fit.val_objective_msp == pytest.approx(ref_selective.aurc_by_thresholds(msp, correct), rel=1e-9)
    assert fit.fallback == (fit.val_objective_msp <= fit.val_objective)


def test_pnorm_softmax_scores_and_calibration_follow_the_fit():
    rng = np.random.default_rng(2)
    logits = rng.normal(0.0, 3.0, size=(600, 6))
    labels = np.where(rng.random(600) < 0.8, logits.argmax(axis=1), rng.integers(0, 6, 600))
    result = measure_arrays(logits[:400], labels[:400], logits[400:], labels[400:],
                             options=Options(scores=("msp", "pnorm_softmax")))
    metrics = result.scores["pnorm_softmax"]
    assert {"p", "temperature", "fallback", "ece", "aece", "mce"} <= set(metrics)
    values = result.score_values["pnorm_softmax"]
    if metrics["fallback"]:
        assert np.array_equal(values, result.score_values["msp"])
    else:
        want = [pnorm_softmax_loop(row, metrics["p"], metrics["temperature"]) for row in logits[:400]]
        np.testing.assert_allclose(values, want, rtol=1e-11, atol=1e-13)


def test_pnorm_softmax_falls_back_to_msp_when_msp_ranks_the_validation_rows_best():
    # The errors are exactly the rows of lowest MSP: MSP's AURC is the oracle's, no (p, T) beats it.
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 2, size=(200, 4))
    msp = scores.log_msp(logits)
    pred = logits.argmax(axis=1)
    labels = np.where(msp > np.median(msp), pred, (pred + 1) % 4)
    fit = posthoc.fit_pnorm_softmax(logits, labels, (1, 2))
    assert fit.fallback and fit.val_objective_msp <= fit.val_objective


# ------------------------------------------------------------------ the pNormSoftmax grid, computed faster
def _grid_logits(seed: int, n: int = 120, k: int = 40) -> np.ndarray:
    """Rows whose normalised logits at the grid's smallest T reach every range of exp: normal results,
    subnormal ones (arguments in [-745, -708]), exact zeros, and rows of equal logits."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k)) * rng.uniform(0.2, 30.0, size=(n, 1))
    logits[::9, rng.integers(0, k)] += 50.0  # one class far above the rest: z spans [-2, 0]
    logits[5] = 1.5  # a constant row: its normalised logits are all 0
    logits[7] = np.round(logits[7])  # ties on a coarse grid
    return logits


@pytest.mark.parametrize("center", [True, False])
def test_pnorm_softmax_grid_is_log_msp_of_the_normalised_logits_bit_for_bit(center):
    # The fit's grid is computed with shared powers, shared shifts and exp's slow path avoided; each of
    # its scores must be the composition of the public functions, bit for bit (the fit's choice of
    # (p, T), and its ties, then cannot change).
    logits = _grid_logits(11)
    ps, t_grid = (1, 2, 3, 7, 10, 64, 65, 1000), (1e-5, 2.0 ** -10, 2.0 ** -9.5, 0.01, 0.3, 1.0, 4.0)
    out = np.empty((len(ps), len(t_grid), logits.shape[0]))
    posthoc._pnorm_softmax_grid(logits, ps, t_grid, center, out)
    for i, p in enumerate(ps):
        normalised = scores.normalised_logits(logits, p, center)
        for j, temperature in enumerate(t_grid):
            want = scores.log_msp(normalised, 1.0 / temperature)
            assert out[i, j].tobytes() == want.tobytes(), (p, temperature)


def test_the_grid_reaches_exps_slow_path_and_its_zeros():
    # Otherwise the test above would not compare the grid where exp underflows (to 0 below about -745,
    # on numpy's slow path between -745 and -708.4) with the plain functions.
    z = scores.normalised_logits(_grid_logits(11), 10)
    z = (z - z.max(axis=1, keepdims=True)) / 2.0 ** -10
    assert (z < -746.0).any() and ((z > -745) & (z < -708.4)).any() and (z > -700).any()


def test_normalised_grid_is_normalised_logits_for_every_p():
    logits = _grid_logits(3, k=7)
    for center in (True, False):
        x, _ = scores.functions.centred_scaled(logits, center)
        for p, got in scores.normalised_grid(x, [1, 2, 5, 64, 65, 2000], center):
            assert got.tobytes() == scores.normalised_logits(logits, p, center).tobytes(), (p, center)


# ------------------------------------------------------------------ the registry and the pipeline
def test_every_registered_score_is_described_and_in_all_or_a_group():
    # 'all' is every score whose entry says so (not the calibrators: --scores calibrators chooses them)
    in_all = tuple(name for name, spec in scores.REGISTRY.items() if spec.in_all)
    assert scores.score_names(["all"]) == in_all
    assert Options(scores=("all",)).scores == in_all
    grouped = {name for names in groups().values() for name in names}
    assert grouped == set(scores.REGISTRY)
    assert Options().scores == ("msp", "max_logit", "pnorm", "temp")
    for name, spec in scores.REGISTRY.items():
        assert spec.name == name and spec.display.description
        assert f"aurc_{name}" in LEADERBOARD_COLUMNS
        assert spec.score is not None or spec.has_probabilities


@pytest.mark.slow
def test_the_original_four_are_unchanged_by_the_new_scores(h):
    logits, labels = h.make_data(n=900, k=6, seed=4)
    default = measure_arrays(logits[:600], labels[:600], logits[600:], labels[600:])
    everything = measure_arrays(logits[:600], labels[:600], logits[600:], labels[600:],
                                 options=Options(scores=("all",)))
    for name in ("msp", "max_logit", "pnorm", "temp"):
        assert everything.scores[name] == default.scores[name], name
        assert np.array_equal(everything.score_values[name], default.score_values[name])
    for name in NEW:
        want = np.array([reference(name, row) for row in logits[:600]])
        np.testing.assert_allclose(everything.score_values[name], want, rtol=1e-12, atol=1e-15)
        assert everything.scores[name]["aurc"] == pytest.approx(
            ref_selective.aurc_by_thresholds(everything.score_values[name], everything.rows.correct), rel=1e-12)
        assert "ece" not in everything.scores[name]  # not probabilities of the top class


def test_new_scores_do_not_depend_on_chunking_or_threads(h):
    logits, labels = h.make_data(n=500, k=5, seed=6)
    runs = [measure_arrays(logits[:300], labels[:300], logits[300:], labels[300:],
                            options=Options(scores=("all",), chunk_rows=rows, workers=workers))
            for rows, workers in ((None, 1), (7, 3))]
    assert runs[0].scores == runs[1].scores


def test_leaderboard_has_a_column_per_chosen_score(h):
    from selcal.report import EvaluationResult

    logits, labels = h.make_data(n=400, k=4, seed=8)
    model = measure_arrays(logits, labels, logits[:100], labels[:100], options=Options(scores=("msp", "gini")))
    (row,) = leaderboard(EvaluationResult(models=[model]), sort_by="aurc_msp")
    assert row["aurc_gini"] == model.scores["gini"]["aurc"] and row["aurc_energy"] is None


def test_cli_scores_all_and_an_unknown_score(cli, dumps, h):
    logits, labels = h.make_data(n=300, k=4, seed=9)
    path = dumps.npz("model.npz", logits, labels)
    out = cli.json(path, "--scores", "all")
    assert list(out["models"][0]["scores"]) == list(groups()["all"])
    result = cli("evaluate", path, "--scores", "msp,nonsense")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"selcal: error: unknown score nonsense; choose from {', '.join(scores.REGISTRY)}, or "
        f"{', '.join(groups())}"]


def test_the_scores_help_names_every_registered_score():
    from selcal.cli.groups import scores_help

    assert all(name in scores_help() for name in scores.REGISTRY)


@pytest.mark.parametrize("p", [65, 1000, 2000, 10000])
def test_normalised_logits_at_large_p_do_not_underflow(p):
    # centred (2, 0, -2): ||x||_p = 2 * 2**(1/p), so x / ||x||_p = (2**(-1/p), 0, -2**(-1/p))
    got = scores.normalised_logits(np.array([[3.0, 1.0, -1.0], [1e-300, 0.0, -1e-300]]), p=p)
    want = 2.0 ** (-1.0 / p)
    np.testing.assert_allclose(got[0], [want, 0.0, -want], rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(got[1], [want, 0.0, -want], rtol=1e-13, atol=1e-300)


def test_every_score_is_the_same_streamed_and_in_memory(dumps, h):
    import selcal

    logits, labels = h.make_data(n=400, k=5, seed=10)
    split = np.where(np.arange(400) % 4 == 0, "val", "test")
    path = dumps.parquet("m.parquet", logits, labels, split=split, row_group_size=50)
    streamed, whole = (selcal.evaluate(path, scores="all", stream=s, chunk_rows=37).models[0].to_dict()
                       for s in (True, False))
    assert streamed["scores"] == whole["scores"]


@pytest.mark.slow
def test_the_shared_temperature_fit_does_not_keep_the_validation_rows_alive():
    # temp and the calibrators that start from T share one fit per validation set; the cache must not hold a
    # finished model's validation rows while the next model is read.
    import gc
    import weakref

    from selcal.scores import builtin

    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(300, 5)), rng.integers(0, 5, 300)
    first = builtin._temperature_fit(logits, labels)
    assert builtin._temperature_fit(logits, labels) is first  # shared while the arrays live
    alive = weakref.ref(logits)
    del logits
    gc.collect()
    assert alive() is None
