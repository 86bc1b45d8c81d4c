"""Post-hoc calibrators fitted on validation rows (CONVENTIONS.md, "Post-hoc calibrators").

Pure functions of arrays: ``fit_*(val_logits, val_labels, ...)`` returns a fit object whose
``log_probabilities(logits)`` (or ``probabilities``) maps a chunk of logits to calibrated class
probabilities. The convex ones (``vector``, ``dirichlet``, ``ets``) are solved to their optimum with
scipy.optimize and certified (gradient 2-norm below 1e-8; the KKT conditions on the simplex for
``ets``); a fit that cannot be certified, or has too few validation rows, raises
:class:`~selcal.errors.SelcalError` with one line saying what to do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy.special import log_softmax, logsumexp, softmax

from .errors import SelcalError

__all__ = ["CALIBRATORS", "GRADIENT_TOLERANCE", "DEFAULT_ODIR_LAMBDA", "DEFAULT_ODIR_MU", "DIRICHLET_MEMORY_LIMIT",
           "VectorFit", "DirichletFit", "EtsFit", "IsotonicFit",
           "fit_vector", "fit_dirichlet", "fit_ets", "fit_isotonic", "minimum_rows"]

CALIBRATORS = ("vector", "dirichlet", "ets", "isotonic")
GRADIENT_TOLERANCE = 1e-8
DEFAULT_ODIR_LAMBDA = 1e-3
DEFAULT_ODIR_MU = 1e-3
DIRICHLET_MEMORY_LIMIT = 2 << 30  # bytes the dirichlet fit may hold (N x K arrays and K x K parameters)
MAX_OUTER_ITERATIONS = 200  # trust-region iterations; each solves its Newton system by conjugate gradients
ROWS_PER_CHUNK_ELEMENTS = 1 << 20
INITIAL_TRUST_RADIUS = 10.0


def minimum_rows(name: str, n_classes: int) -> int:
    """Fewest validation rows a calibrator is fitted on: one per class for the per-class maps, 3 for ets."""
    return 3 if name == "ets" else max(n_classes, 2)


def _check_rows(name: str, n_val: int, n_classes: int) -> None:
    needed = minimum_rows(name, n_classes)
    if n_val < needed:
        raise SelcalError(f"{name} needs at least {needed} validation rows (K = {n_classes}), got {n_val}: "
                          f"give more validation rows (--val, a split column or a larger --val-fraction)")


def _chunks(n_rows: int, n_classes: int):
    step = max(1, ROWS_PER_CHUNK_ELEMENTS // max(n_classes, 1))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def _as64(logits) -> np.ndarray:
    return np.ascontiguousarray(logits, dtype=np.float64)


class _ClassLinear:
    """Mean NLL of softmax(z), z_ik = <Θ_k, f_ik> linear in per-class parameters Θ (K x F), plus a
    diagonal quadratic penalty ½ Σ d ⊙ Θ²; its gradient and Hessian-vector products.

    ``shared`` features (N x F, the same for every class: dirichlet) or per-class ones given by a
    (N x K) matrix v with f_ik = (v_ik, 1) (vector scaling). The solver works in u with Θ_k = M_k u_k,
    M_k = L_k^-T for the Cholesky factor L_k of the class's own curvature block at the start
    (block-Jacobi preconditioning: each class's curvature, near 0 for a class rarely predicted, is
    scaled to 1), so the trust-region Newton-CG needs few conjugate-gradient steps.
    """

    def __init__(self, labels, penalty_diag, *, shared=None, per_class=None):
        self.labels = labels
        self.shared, self.per_class = shared, per_class
        source = shared if shared is not None else per_class
        self.n, self.k = labels.size, (per_class.shape[1] if per_class is not None else penalty_diag.shape[0])
        self.d = penalty_diag  # K x F
        self.f = penalty_diag.shape[1]
        self.rows = _chunks(source.shape[0], max(source.shape[1], self.k))
        self.M = np.broadcast_to(np.eye(self.f), (self.k, self.f, self.f))
        self._theta, self._p = None, None

    # z and its adjoint in Θ
    def _z(self, theta, rows):
        if self.shared is not None:
            return self.shared[rows] @ theta.T
        return self.per_class[rows] * theta[:, 0] + theta[:, 1]

    def _adjoint(self, g, rows):
        if self.shared is not None:
            return g.T @ self.shared[rows]
        return np.column_stack([np.einsum("ij,ij->j", g, self.per_class[rows]), g.sum(axis=0)])

    def theta_value_and_gradient(self, theta):
        if self.per_class is not None:
            return self._vector_value_and_gradient(theta)
        total, gradient, probabilities = [], np.zeros_like(theta), []
        for rows in self.rows:
            z = self._z(theta, rows)
            lse = logsumexp(z, axis=1)
            index = np.arange(z.shape[0])
            total.append(lse - z[index, self.labels[rows]])
            p = np.exp(z - lse[:, None])
            probabilities.append(p)
            g = p.copy()
            g[index, self.labels[rows]] -= 1.0
            gradient += self._adjoint(g, rows)
        self._theta, self._p = theta.copy(), probabilities
        value = math.fsum(np.concatenate(total)) / self.n + 0.5 * float(np.sum(self.d * theta * theta))
        return value, gradient / self.n + self.d * theta

    def _vector_value_and_gradient(self, theta):
        """Vector scaling in one pass: P = softmax(v w + b) and PV = P ⊙ v are kept (float32) for the
        Hessian-vector products Hv = [A dw + B db - PV^T s, B dw + C db - P^T s], s = PV dw + P db: four
        matrix-vector products, no N x K temporaries."""
        v, w, b, labels = self.per_class, theta[:, 0], theta[:, 1], self.labels
        index = np.arange(self.n)
        nll = np.empty(self.n)
        sums = np.zeros((3, self.k))
        p32 = np.empty(v.shape, dtype=np.float32)
        pv32 = np.empty(v.shape, dtype=np.float32)
        for rows in self.rows:
            z = v[rows] * w
            z += b
            top = z.max(axis=1)
            z -= top[:, None]
            label_z = z[index[rows] - rows.start, labels[rows]]
            np.exp(z, out=z)
            total = z.sum(axis=1)
            nll[rows] = np.log(total) - label_z
            z /= total[:, None]  # P
            p32[rows] = z
            sums[2] += z.sum(axis=0)
            z *= v[rows]  # P ⊙ v
            pv32[rows] = z
            sums[1] += z.sum(axis=0)
            sums[0] += np.einsum("ij,ij->j", z, v[rows])
        label_v = v[index, labels]
        gradient = np.column_stack([sums[1] - np.bincount(labels, label_v, minlength=self.k),
                                    sums[2] - np.bincount(labels, minlength=self.k)])
        self._theta, self._p, self._pv, self._sums = theta.copy(), p32, pv32, sums
        value = math.fsum(nll) / self.n + 0.5 * float(np.sum(self.d * theta * theta))
        return value, gradient / self.n + self.d * theta

    def _theta_hessian(self, theta, direction):
        if self._theta is None or not np.array_equal(theta, self._theta):
            self.theta_value_and_gradient(theta)
        if self.per_class is not None:
            dw, db = direction[:, 0], direction[:, 1]
            a, b, c = self._sums
            s = (self._pv @ dw.astype(np.float32)).astype(np.float64) + self._p @ db.astype(np.float32)
            s32 = s.astype(np.float32)
            out = np.column_stack([a * dw + b * db - (s32 @ self._pv).astype(np.float64),
                                   b * dw + c * db - (s32 @ self._p).astype(np.float64)])
            return out / self.n + self.d * direction
        # Dirichlet: two matrix products per chunk (float64: conjugate gradients need exact products).
        out = np.zeros_like(theta)
        for rows, p in zip(self.rows, self._p):
            x = self.shared[rows]
            dz = x @ direction.T
            s = np.einsum("ij,ij->i", p, dz)
            dz -= s[:, None]
            dz *= p
            out += dz.T @ x
        return out / self.n + self.d * direction

    def precondition(self, theta):
        """M_k = L_k^-T from the curvature blocks Σ_i p_ik (1 - p_ik) f_ik f_ik^T / N + diag(d_k) at Θ."""
        blocks = np.zeros((self.k, self.f, self.f))
        for rows in self.rows:
            z = self._z(theta, rows)
            p = np.exp(z - logsumexp(z, axis=1)[:, None])
            weight = p * (1.0 - p)
            if self.shared is not None:
                x = self.shared[rows]
                for c in range(self.k):
                    blocks[c] += (x * weight[:, c:c + 1]).T @ x
            else:
                v = self.per_class[rows]
                blocks[:, 0, 0] += np.einsum("ij,ij->j", weight, v * v)
                blocks[:, 0, 1] += np.einsum("ij,ij->j", weight, v)
                blocks[:, 1, 1] += weight.sum(axis=0)
        blocks[:, 1, 0] = blocks[:, 0, 1] if self.shared is None else blocks[:, 1, 0]
        blocks /= self.n
        index = np.arange(self.f)
        blocks[:, index, index] += self.d + 1e-12 * (1.0 + np.trace(blocks, axis1=1, axis2=2))[:, None]
        factors = np.linalg.cholesky(blocks)
        self.M = np.linalg.inv(factors).transpose(0, 2, 1)
        self.L_norm = float(np.max(np.linalg.norm(factors, ord=2, axis=(1, 2))))

    # the same in u (Θ_k = M_k u_k), flattened for scipy
    def _theta_of(self, u):
        return np.einsum("kab,kb->ka", self.M, u.reshape(self.k, self.f))

    def _u_of(self, theta_gradient):
        return np.einsum("kab,ka->kb", self.M, theta_gradient).ravel()

    def value_and_gradient(self, u):
        value, gradient = self.theta_value_and_gradient(self._theta_of(u))
        return value, self._u_of(gradient)

    def hessian_vector(self, u, direction):
        return self._u_of(self._theta_hessian(self._theta_of(u), self._theta_of(direction)))

    def solve(self, theta0, name: str, hint: str):
        """Trust-region Newton-CG in u (scipy's ``trust-ncg``), preconditioned at the start, until the
        Θ-gradient's 2-norm is below 1e-8 (the u tolerance is tightened if it is met first)."""
        self.precondition(theta0)
        u = np.linalg.solve(self.M, theta0[:, :, None])[:, :, 0].ravel()
        iterations, gtol = 0, GRADIENT_TOLERANCE / max(self.L_norm, 1.0)
        for _ in range(3):
            result = optimize.minimize(self.value_and_gradient, u, jac=True, hessp=self.hessian_vector,
                                       method="trust-ncg", options={"gtol": gtol, "maxiter": MAX_OUTER_ITERATIONS,
                                                                    "initial_trust_radius": INITIAL_TRUST_RADIUS})
            u, iterations = result.x, iterations + int(result.nit)
            theta = self._theta_of(u)
            value, gradient = self.theta_value_and_gradient(theta)
            norm = float(np.linalg.norm(gradient))
            if norm < GRADIENT_TOLERANCE or result.nit >= MAX_OUTER_ITERATIONS:
                break
            gtol /= 100.0
        if not norm < GRADIENT_TOLERANCE:
            raise SelcalError(f"{name}: the optimum could not be certified within {MAX_OUTER_ITERATIONS} trust-region "
                              f"iterations (gradient norm {norm:.2g} > {GRADIENT_TOLERANCE:g}); {hint}")
        return theta, value, norm, iterations


@dataclass
class VectorFit:
    """p = softmax(w ⊙ v + b) (Guo et al. 2017, vector scaling), with the L2 penalty (μ/K) Σ_j b_j²."""

    w: np.ndarray
    b: np.ndarray
    mu: float
    val_objective: float
    gradient_norm: float
    iterations: int

    def log_probabilities(self, logits) -> np.ndarray:
        return log_softmax(_as64(logits) * self.w + self.b, axis=1)

    def params(self) -> dict:
        return {"w": self.w.tolist(), "b": self.b.tolist()}


def fit_vector(val_logits, val_labels, mu: float = DEFAULT_ODIR_MU, temperature: float = 1.0,
               x0: np.ndarray | None = None) -> VectorFit:
    """Vector scaling: w, b in R^K minimising mean NLL + (μ/K) Σ_j b_j², solved to gradient norm < 1e-8.

    Started from w = 1/T (the ``temp`` temperature), b = 0, or from ``x0`` = (w, b) concatenated.
    Trust-region Newton-CG (scipy's ``trust-ncg``) with exact Hessian-vector products.

    References
    ----------
    Guo et al., "On calibration of modern neural networks", ICML 2017, sec. 4.2.

    Examples
    --------
    >>> v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [2.0, 0.0], [0.0, 2.0]])
    >>> fit = fit_vector(v, np.array([0, 1, 0, 1, 0, 1]))
    >>> fit.gradient_norm < 1e-8, fit.w.round(3).tolist()
    (True, [0.756, 0.756])
    """
    v = _as64(val_logits)
    labels = np.asarray(val_labels, dtype=np.int64)
    n, k = v.shape
    _check_rows("vector", n, k)
    d = np.column_stack([np.zeros(k), np.full(k, 2.0 * mu / k)])
    problem = _ClassLinear(labels, d, per_class=v)
    theta0 = (np.column_stack([np.full(k, 1.0 / temperature), np.zeros(k)]) if x0 is None
              else np.column_stack([x0[:k], x0[k:]]).astype(np.float64))
    theta, value, norm, iterations = problem.solve(
        theta0, "vector", "a class may never be predicted on the validation rows: give more validation rows or a larger --odir-mu")
    return VectorFit(theta[:, 0].copy(), theta[:, 1].copy(), mu, value, norm, iterations)


@dataclass
class DirichletFit:
    """p = softmax(W log softmax(v) + b) (Kull et al. 2019), with the ODIR penalty."""

    W: np.ndarray
    b: np.ndarray
    odir_lambda: float
    mu: float
    val_objective: float
    gradient_norm: float
    iterations: int

    def log_probabilities(self, logits) -> np.ndarray:
        return log_softmax(log_softmax(_as64(logits), axis=1) @ self.W.T + self.b, axis=1)

    def params(self) -> dict:
        return {"W": self.W.tolist(), "b": self.b.tolist()}


def dirichlet_memory(n_val: int, n_classes: int) -> int:
    """Bytes the dirichlet fit holds: the validation features and their softmax (N x K each, float64), the
    K preconditioner blocks (K x (K+1)²) and about a dozen K x (K + 1) vectors of the solver."""
    return 8 * (3 * n_val * n_classes + 2 * n_classes * (n_classes + 1) ** 2 + 12 * n_classes * (n_classes + 1))


def fit_dirichlet(val_logits, val_labels, odir_lambda: float = DEFAULT_ODIR_LAMBDA, mu: float = DEFAULT_ODIR_MU,
                  temperature: float = 1.0, x0: np.ndarray | None = None) -> DirichletFit:
    """Dirichlet calibration with ODIR: minimise mean NLL + λ/(K(K-1)) Σ_{i≠j} W_ij² + (μ/K) Σ_j b_j².

    Started from W = I/T, b = 0 (exactly temperature scaling), or from ``x0`` = [W | b] (K x (K+1)).
    Refused in one line when the fit would hold more than :data:`DIRICHLET_MEMORY_LIMIT` bytes, or when its
    optimum cannot be certified.

    References
    ----------
    Kull et al., "Beyond temperature scaling: obtaining well-calibrated multiclass probabilities with
    Dirichlet calibration", NeurIPS 2019, sec. 3 and 4 (ODIR).
    """
    v = _as64(val_logits)
    labels = np.asarray(val_labels, dtype=np.int64)
    n, k = v.shape
    needed = dirichlet_memory(n, k)
    if needed > DIRICHLET_MEMORY_LIMIT:
        raise SelcalError(f"dirichlet: K = {k} classes with {n} validation rows needs about {needed / 2**30:.1f} GiB "
                          f"(K x K weights), above the {DIRICHLET_MEMORY_LIMIT / 2**30:.0f} GiB limit: "
                          f"use vector, ets or temp for this many classes")
    _check_rows("dirichlet", n, k)
    features = np.column_stack([log_softmax(v, axis=1), np.ones(n)])
    weight = 2.0 * odir_lambda / (k * (k - 1))
    d = np.column_stack([np.full((k, k), weight) * (1.0 - np.eye(k)), np.full(k, 2.0 * mu / k)])
    problem = _ClassLinear(labels, d, shared=features)
    theta0 = (np.column_stack([np.eye(k) / temperature, np.zeros(k)]) if x0 is None
              else np.asarray(x0, dtype=np.float64).reshape(k, k + 1))
    theta, value, norm, iterations = problem.solve(
        theta0, "dirichlet", f"it may memorise the validation rows at --odir-lambda {odir_lambda:g}: try a larger --odir-lambda")
    return DirichletFit(theta[:, :k].copy(), theta[:, k].copy(), odir_lambda, mu, value, norm, iterations)


@dataclass
class EtsFit:
    """p = w1 softmax(v/T) + w2 softmax(v) + w3/K (Zhang et al. 2020), w on the simplex."""

    weights: np.ndarray
    temperature: float
    val_objective: float
    kkt_residual: float

    def probabilities(self, logits) -> np.ndarray:
        v = _as64(logits)
        w1, w2, w3 = self.weights
        return w1 * softmax(v / self.temperature, axis=1) + w2 * softmax(v, axis=1) + w3 / v.shape[1]

    def log_probabilities(self, logits) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities(logits))

    def params(self) -> dict:
        return {"weights": self.weights.tolist(), "temperature": self.temperature}


def ets_components(logits, labels, temperature: float) -> np.ndarray:
    """N x 3: the probability of each row's label under softmax(v/T), softmax(v) and the uniform."""
    v = _as64(logits)
    labels = np.asarray(labels, dtype=np.int64)
    index = np.arange(labels.size)
    hot = np.exp(log_softmax(v / temperature, axis=1)[index, labels])
    plain = np.exp(log_softmax(v, axis=1)[index, labels])
    return np.column_stack([hot, plain, np.full(labels.size, 1.0 / v.shape[1])])


def _ets_objective(components: np.ndarray, w: np.ndarray):
    mixed = components @ w
    value = -math.fsum(np.log(mixed)) / mixed.size
    ratio = components / mixed[:, None]
    gradient = -ratio.mean(axis=0)
    hessian = ratio.T @ ratio / mixed.size
    return value, gradient, hessian


def ets_kkt_residual(components: np.ndarray, w: np.ndarray) -> float:
    """KKT residual of min -mean log(A w) on the simplex at w (0 at the optimum).

    Σ_j w_j g_j = -1 at every feasible w, so the multiplier is -1: the residual is the largest of
    |g_j + 1| over the support and max(0, -(g_j + 1)) off it.
    """
    _, gradient, _ = _ets_objective(components, w)
    support = w > 0
    on = np.abs(gradient[support] + 1.0)
    off = np.maximum(0.0, -(gradient[~support] + 1.0))
    return float(max(on.max(initial=0.0), off.max(initial=0.0)))


def _polish_on_face(components: np.ndarray, w: np.ndarray, support: np.ndarray) -> np.ndarray:
    """Newton's method on the face {w_j = 0 off ``support``, Σ w = 1}, kept inside the face."""
    w = np.where(support, w, 0.0)
    w = w / w.sum()
    idx = np.flatnonzero(support)
    if idx.size == 1:
        out = np.zeros(3)
        out[idx] = 1.0
        return out
    for _ in range(100):
        _, gradient, hessian = _ets_objective(components, w)
        h = hessian[np.ix_(idx, idx)]
        kkt = np.block([[h, np.ones((idx.size, 1))], [np.ones((1, idx.size)), np.zeros((1, 1))]])
        step = np.linalg.solve(kkt, np.concatenate([-gradient[idx], [0.0]]))[:-1]
        shrink = 1.0
        negative = step < 0
        if negative.any():
            shrink = min(1.0, float(np.min(-w[idx][negative] / step[negative])) * 0.999)
        new = w.copy()
        new[idx] = w[idx] + shrink * step
        new[idx] = np.maximum(new[idx], 0.0)
        new /= new.sum()
        if np.max(np.abs(new - w)) < 1e-16:
            return new
        w = new
    return w


def fit_ets(val_logits, val_labels, temperature: float) -> EtsFit:
    """Ensemble temperature scaling: w on the simplex minimising the validation NLL of the mixture.

    Solved by scipy's SLSQP from the simplex's centre, then polished by Newton's method on the face
    the solution lies on (the optimum is often on an edge), and certified by the KKT conditions to 1e-8;
    if they fail, every face of the simplex is tried and the certified one kept.

    References
    ----------
    Zhang, Kailkhura & Han, "Mix-n-Match: ensemble and compositional methods for uncertainty
    calibration in deep learning", ICML 2020, sec. 4.1 (ETS).
    """
    v = _as64(val_logits)
    n, k = v.shape
    _check_rows("ets", n, k)
    components = ets_components(v, val_labels, temperature)
    result = optimize.minimize(lambda w: _ets_objective(components, w)[:2], np.full(3, 1.0 / 3), jac=True,
                               method="SLSQP", bounds=[(0.0, 1.0)] * 3,
                               constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones(3)}],
                               options={"ftol": 1e-15, "maxiter": 500})
    start = np.clip(result.x, 0.0, None)
    candidates = [_polish_on_face(components, start, start > 1e-7)]
    if ets_kkt_residual(components, candidates[0]) >= GRADIENT_TOLERANCE:
        faces = [np.array(mask, dtype=bool) for mask in
                 [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1)]]
        candidates += [_polish_on_face(components, np.full(3, 1.0 / 3), face) for face in faces]
    with np.errstate(divide="ignore"):
        scored = [(ets_kkt_residual(components, w), _ets_objective(components, w)[0], i) for i, w in enumerate(candidates)]
    residual, value, best = min(scored)
    if not residual < GRADIENT_TOLERANCE:
        raise SelcalError(f"ets: the optimum could not be certified (KKT residual {residual:.2g} > {GRADIENT_TOLERANCE:g})")
    return EtsFit(candidates[best], float(temperature), value, residual)


ISOTONIC_POOLING = float(np.finfo(np.float64).resolution)  # 1e-15: scikit-learn pools x closer than this


@dataclass
class IsotonicFit:
    """Per class k, a non-decreasing map of p_k = softmax(v)_k, linear between its thresholds, clipped."""

    thresholds: list[np.ndarray] = field(repr=False)
    values: list[np.ndarray] = field(repr=False)

    def probabilities(self, logits) -> np.ndarray:
        p = softmax(_as64(logits), axis=1)
        out = np.empty_like(p)
        for k, (x, y) in enumerate(zip(self.thresholds, self.values)):
            out[:, k] = np.interp(p[:, k], x, y)
        total = out.sum(axis=1, keepdims=True)
        uniform = np.full_like(out, 1.0 / out.shape[1])
        return np.divide(out, total, out=uniform, where=total != 0)

    def log_probabilities(self, logits) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities(logits))

    def params(self) -> dict:
        return {"thresholds": [len(x) for x in self.thresholds]}


def _pool(x_sorted: np.ndarray) -> np.ndarray:
    """Group index of each sorted x: a group starts where x - (the group's first x) >= 1e-15 (scikit-learn)."""
    starts = np.empty(x_sorted.size, dtype=bool)
    starts[0] = True
    starts[1:] = np.diff(x_sorted) >= ISOTONIC_POOLING
    gaps = np.flatnonzero(~starts[1:]) + 1
    if gaps.size and np.any(np.diff(x_sorted)[~starts[1:]] > 0):  # a run of values 0 < gap < 1e-15: walk it
        first = x_sorted[0]
        for j in range(1, x_sorted.size):
            starts[j] = x_sorted[j] - first >= ISOTONIC_POOLING
            if starts[j]:
                first = x_sorted[j]
    return np.cumsum(starts) - 1


def fit_isotonic(val_logits, val_labels) -> IsotonicFit:
    """One-vs-rest isotonic regression of [y = k] on softmax(v)_k over the validation rows.

    Values of p_k closer than 1e-15 are pooled (their targets averaged, weighted by count), the
    non-decreasing least-squares fit solved by scipy's pool-adjacent-violators, and a new row mapped by
    linear interpolation between the fitted points, clipped to the fitted range; the K values of a row
    are then renormalised (uniform when all are 0). This is scikit-learn's ``CalibratedClassifierCV``
    with ``method="isotonic"`` for K >= 3.

    References
    ----------
    Zadrozny & Elkan, "Transforming classifier scores into accurate multiclass probability estimates",
    KDD 2002.
    """
    v = _as64(val_logits)
    labels = np.asarray(val_labels, dtype=np.int64)
    n, k = v.shape
    _check_rows("isotonic", n, k)
    p = softmax(v, axis=1)
    thresholds, values = [], []
    for c in range(k):
        target = (labels == c).astype(np.float64)
        order = np.lexsort((target, p[:, c]))
        x, y = p[order, c], target[order]
        group = _pool(x)
        count = np.bincount(group).astype(np.float64)
        first = np.flatnonzero(np.r_[True, np.diff(group) > 0])
        mean = np.bincount(group, weights=y) / count
        fitted = optimize.isotonic_regression(mean, weights=count, increasing=True).x
        thresholds.append(x[first])
        values.append(fitted)
    return IsotonicFit(thresholds, values)
