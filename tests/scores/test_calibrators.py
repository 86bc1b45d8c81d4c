"""Post-hoc calibrators (CONVENTIONS.md, "Post-hoc calibrators") against independent computations."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SAMPLES, boosted_logits, save_npz, shifted_logits
from scipy import optimize
from scipy.special import log_softmax, logsumexp, softmax
from typer.testing import CliRunner

from selcal.cli import app
from selcal.errors import SelcalError
from selcal.scores import calibrators as C
from selcal.scores.fits import fit_temperature


def load(name: str):
    table = pq.read_table(SAMPLES / f"{name}.parquet").to_pandas()
    logits = np.stack(table["logits"].to_numpy()).astype(np.float64)
    labels, split = table["label"].to_numpy(), table["split"].to_numpy()
    return logits[split == "val"], labels[split == "val"], logits[split == "test"], labels[split == "test"]


def synthetic(n=300, k=4, seed=0, scale=2.0):
    return boosted_logits(n, k, seed, scale, boost=1.0)


def nll(log_p, labels):
    return -np.mean(log_p[np.arange(labels.size), labels])


# ---------------------------------------------------------------- isotonic = scikit-learn's one-vs-rest


def sklearn_isotonic(val_logits, val_labels, test_logits):
    from sklearn.isotonic import IsotonicRegression

    p, pt = softmax(val_logits, axis=1), softmax(test_logits, axis=1)
    out = np.empty_like(pt)
    for k in range(p.shape[1]):
        model = IsotonicRegression(out_of_bounds="clip").fit(p[:, k], (val_labels == k).astype(float))
        out[:, k] = model.predict(pt[:, k])
    total = out.sum(axis=1, keepdims=True)
    return np.divide(out, total, out=np.full_like(out, 1.0 / out.shape[1]), where=total != 0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["calibrator_cifar10_resnet50_ce", "netcal_densenetbc100c100"])
def test_isotonic_equals_scikit_learn_on_samples(name):
    pytest.importorskip("sklearn")
    val, val_y, test, _ = load(name)
    fit = C.fit_isotonic(val, val_y)
    assert np.max(np.abs(fit.probabilities(test) - sklearn_isotonic(val, val_y, test))) < 1e-12


def test_isotonic_pools_values_closer_than_1e_15_as_scikit_learn():
    pytest.importorskip("sklearn")
    logits, labels = synthetic(n=200, k=3, seed=3)
    logits[:40] = logits[0]  # exact ties
    logits[40:80] = 0.0
    logits[40:80, 0] = np.arange(40) * 1e-15  # p_0 near 1/3 in steps of about 2e-16: pooled in groups
    labels[40:80] = np.arange(40) % 3
    test, _ = synthetic(n=300, k=3, seed=4)
    test = np.vstack([test, logits[:80]])
    fit = C.fit_isotonic(logits, labels)
    assert len(np.unique(softmax(logits[40:80], axis=1)[:, 0])) > len(fit.thresholds[0][
        (fit.thresholds[0] > 0.33) & (fit.thresholds[0] < 0.34)])
    assert np.max(np.abs(fit.probabilities(test) - sklearn_isotonic(logits, labels, test))) < 1e-12


def test_isotonic_nll_is_infinite_when_the_true_class_gets_zero():
    logits, labels = synthetic(n=100, k=3, seed=5, scale=6.0)
    fit = C.fit_isotonic(logits, labels)
    log_p = fit.log_probabilities(logits)
    assert np.isneginf(log_p).any()  # a class never seen where its probability is lowest


# ---------------------------------------------------------------- convex calibrators: optimality


def second_solver(objective, x0):
    """L-BFGS-B from another start, to a tight tolerance: an independent optimiser of the same objective."""
    result = optimize.minimize(objective, x0, jac=True, method="L-BFGS-B",
                               options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20000, "maxcor": 30})
    return result.x, result.fun


def vector_objective(v, y, mu):
    n, k = v.shape

    def f(x):
        w, b = x[:k], x[k:]
        z = v * w + b
        log_p = log_softmax(z, axis=1)
        g = np.exp(log_p)
        g[np.arange(n), y] -= 1
        value = -log_p[np.arange(n), y].mean() + mu / k * b @ b
        return value, np.concatenate([(g * v).sum(0) / n, g.sum(0) / n + 2 * mu / k * b])
    return f


@pytest.mark.parametrize("seed, k", [(0, 4), (1, 7)])
def test_vector_is_optimal_against_a_second_solver(seed, k):
    v, y = synthetic(n=400, k=k, seed=seed)
    fit = C.fit_vector(v, y, mu=0.01, temperature=fit_temperature(v, y).temperature)
    assert fit.gradient_norm < 1e-8
    f = vector_objective(v, y, 0.01)
    value, gradient = f(np.concatenate([fit.w, fit.b]))
    assert np.linalg.norm(gradient) < 1e-8 and value == pytest.approx(fit.val_objective, abs=1e-13)
    rng = np.random.default_rng(seed)
    x, other = second_solver(f, np.concatenate([rng.uniform(0.2, 3, k), rng.normal(0, 1, k)]))
    assert fit.val_objective <= other + 1e-13
    assert np.max(np.abs(x - np.concatenate([fit.w, fit.b]))) < 1e-4


def dirichlet_objective(v, y, lam, mu):
    n, k = v.shape
    x_log = log_softmax(v, axis=1)
    off = 1 - np.eye(k)

    def f(x):
        W, b = x[:k * k].reshape(k, k), x[k * k:]
        z = x_log @ W.T + b
        log_p = z - logsumexp(z, axis=1, keepdims=True)
        g = np.exp(log_p)
        g[np.arange(n), y] -= 1
        value = -log_p[np.arange(n), y].mean() + lam / (k * (k - 1)) * np.sum((W * off) ** 2) + mu / k * b @ b
        grad_w = g.T @ x_log / n + 2 * lam / (k * (k - 1)) * W * off
        return value, np.concatenate([grad_w.ravel(), g.sum(0) / n + 2 * mu / k * b])
    return f


@pytest.mark.slow
def test_dirichlet_is_optimal_against_a_second_solver():
    v, y = synthetic(n=500, k=5, seed=2)
    fit = C.fit_dirichlet(v, y, odir_lambda=0.01, mu=0.01)
    f = dirichlet_objective(v, y, 0.01, 0.01)
    x = np.concatenate([fit.W.ravel(), fit.b])
    value, gradient = f(x)
    assert fit.gradient_norm < 1e-8 and np.linalg.norm(gradient) < 1e-8
    assert value == pytest.approx(fit.val_objective, abs=1e-13)
    rng = np.random.default_rng(0)
    other_x, other = second_solver(f, rng.normal(0, 0.3, x.size))
    assert fit.val_objective <= other + 1e-13
    assert np.max(np.abs(other_x - x)) < 1e-3


def test_dirichlet_and_vector_sit_at_the_best_softmax_gauge():
    """Adding a vector to every class's parameters leaves the NLL unchanged, so at the optimum the penalty's
    own gradient along that direction vanishes: sum_k b_k = 0, and sum over k != j of W_kj = 0 for every j.
    A gradient norm below 1e-8 alone allows 1e-3 there (the penalty's curvature is about 1e-5)."""
    v, y = synthetic(n=500, k=5, seed=2)
    fit = C.fit_dirichlet(v, y, odir_lambda=0.01, mu=0.01)
    off = fit.W - np.diag(np.diag(fit.W))
    assert np.max(np.abs(off.sum(axis=0))) < 1e-12 and abs(fit.b.sum()) < 1e-12
    vector = C.fit_vector(v, y, mu=0.01, temperature=fit_temperature(v, y).temperature)
    assert abs(vector.b.sum()) < 1e-12


def test_dirichlet_starts_at_temperature_scaling():
    v, y = synthetic(n=200, k=3, seed=6)
    fit = C.fit_dirichlet(v, y, temperature=2.0, odir_lambda=1e6, mu=1e6)  # the penalty pins W's off-diagonal
    assert np.max(np.abs(fit.W - np.diag(np.diag(fit.W)))) < 1e-5


@pytest.mark.slow
def test_reported_parameters_reproduce_the_test_metrics():
    val, val_y, test, test_y = load("calibrator_cifar10_resnet50_ce")
    temperature = fit_temperature(val, val_y).temperature
    vector = C.fit_vector(val, val_y, temperature=temperature)
    params = vector.params()
    log_p = log_softmax(test * np.array(params["w"]) + np.array(params["b"]), axis=1)
    assert nll(log_p, test_y) == pytest.approx(nll(vector.log_probabilities(test), test_y), abs=1e-13)
    dirichlet = C.fit_dirichlet(val, val_y, odir_lambda=0.01, mu=0.01, temperature=temperature)
    params = dirichlet.params()
    log_p = log_softmax(log_softmax(test, axis=1) @ np.array(params["W"]).T + np.array(params["b"]), axis=1)
    assert nll(log_p, test_y) == pytest.approx(nll(dirichlet.log_probabilities(test), test_y), abs=1e-13)
    ets = C.fit_ets(val, val_y, temperature)
    params = ets.params()
    w1, w2, w3 = params["weights"]
    p = w1 * softmax(test / params["temperature"], axis=1) + w2 * softmax(test, axis=1) + w3 / test.shape[1]
    assert nll(np.log(p), test_y) == pytest.approx(nll(ets.log_probabilities(test), test_y), abs=1e-13)


# ---------------------------------------------------------------- ets: KKT on the simplex


def ets_brute_force(components):
    """Every face of the simplex separately: the vertices, each edge by a bounded scalar search, the
    interior by Nelder-Mead over softmax coordinates; the lowest NLL of them."""
    def nll_at(w):
        with np.errstate(divide="ignore"):
            return -np.mean(np.log(components @ w))

    values = [nll_at(np.eye(3)[j]) for j in range(3)]
    for i, j in ((0, 1), (0, 2), (1, 2)):
        def on_edge(t, i=i, j=j):
            w = np.zeros(3)
            w[i], w[j] = t, 1 - t
            return nll_at(w)
        values.append(optimize.minimize_scalar(on_edge, bounds=(0, 1), method="bounded",
                                               options={"xatol": 1e-13}).fun)
    interior = optimize.minimize(lambda a: nll_at(softmax(np.r_[a, 0.0])), np.zeros(2), method="Nelder-Mead",
                                 options={"xatol": 1e-12, "fatol": 1e-15, "maxiter": 4000})
    values.append(interior.fun)
    return min(values)


@pytest.mark.parametrize("name", ["calibrator_cifar10_resnet50_ce", "lspair_alpha0.2", "sctl_cifar10lt_resnet110"])
def test_ets_meets_its_kkt_conditions_and_a_second_solver(name):
    val, val_y, _, _ = load(name)
    temperature = fit_temperature(val, val_y).temperature
    fit = C.fit_ets(val, val_y, temperature)
    components = C.ets_components(val, val_y, temperature)
    assert fit.weights.sum() == pytest.approx(1.0, abs=1e-15) and (fit.weights >= 0).all()
    assert C.ets_kkt_residual(components, fit.weights) < 1e-8
    other = ets_brute_force(components)
    assert fit.val_objective <= other + 1e-12


def test_ets_at_temperature_one_is_certified():
    """T = 1 (temp's fallback) makes softmax(v/T) and softmax(v) equal: a singular Newton system on the face."""
    val, val_y, _, _ = load("calibrator_cifar10_resnet50_ce")
    fit = C.fit_ets(val, val_y, 1.0)
    components = C.ets_components(val, val_y, 1.0)
    assert C.ets_kkt_residual(components, fit.weights) < 1e-8
    assert fit.val_objective <= ets_brute_force(components) + 1e-12


def test_ets_kkt_residual_sees_a_wrong_vertex():
    val, val_y, _, _ = load("lspair_alpha0.2")
    temperature = fit_temperature(val, val_y).temperature
    components = C.ets_components(val, val_y, temperature)
    assert C.ets_kkt_residual(components, np.array([0.0, 1.0, 0.0])) > 1e-3  # plain softmax is not optimal


# ---------------------------------------------------------------- refusals


def test_too_few_validation_rows_are_refused_in_one_line():
    v, y = synthetic(n=5, k=10)
    for fit in (C.fit_vector, C.fit_dirichlet, C.fit_isotonic):
        with pytest.raises(SelcalError, match="validation rows") as error:
            fit(v, y)
        assert "\n" not in str(error.value)


def test_dirichlet_refuses_a_k_too_large_for_memory():
    with pytest.raises(SelcalError, match="GiB") as error:
        C.fit_dirichlet(np.zeros((20, 20000)), np.zeros(20, dtype=np.int64))
    assert "\n" not in str(error.value)


def test_uncertifiable_dirichlet_suggests_a_larger_lambda(monkeypatch):
    monkeypatch.setattr(C, "MAX_OUTER_ITERATIONS", 3)
    v, y = synthetic(n=40, k=8, seed=9, scale=4.0)
    with pytest.raises(SelcalError, match="--odir-lambda") as error:
        C.fit_dirichlet(v, y, odir_lambda=1e-9, mu=1e-9)
    assert "\n" not in str(error.value)


def test_ets_is_fitted_when_temperature_keeps_one(tmp_path):
    """Validation rows all correct: temp keeps T = 1, so softmax(v / T) and softmax(v) are the same
    component of the mixture; the fit must still give the optimum, not a singular-matrix traceback."""
    test = save_npz(tmp_path / "test.npz", *shifted_logits(600, 10, 0))
    val = save_npz(tmp_path / "val.npz", *shifted_logits(300, 10, 1, shift=8.0))
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

    logits, labels = shifted_logits(400, 5, 2, shift=1.0)
    fit = fit_ets(logits, labels, 1.0)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    py = p[np.arange(labels.size), labels]
    grid = np.linspace(0.0, 1.0, 20001)
    nll = [-np.mean(np.log((1 - w3) * py + w3 / 5)) for w3 in grid]
    w3 = fit.weights[2] if hasattr(fit, "weights") else fit.w[2]
    assert -np.mean(np.log((1 - w3) * py + w3 / 5)) <= min(nll) + 1e-9
