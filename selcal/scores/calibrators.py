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

from ..errors import SelcalError, said

__all__ = ["GRADIENT_TOLERANCE", "REPRODUCIBLE_TO", "SOLVER_KEYS", "DEFAULT_ODIR_LAMBDA", "DEFAULT_ODIR_MU", "DIRICHLET_MEMORY_LIMIT",
           "check_dirichlet_size", "VectorFit", "DirichletFit", "EtsFit", "IsotonicFit",
           "fit_vector", "fit_dirichlet", "fit_ets", "fit_isotonic", "minimum_rows"]

GRADIENT_TOLERANCE = 1e-8
# What the certificate above leaves free: scipy.optimize may stop at another point of the region whose
# gradient norm is below 1e-8 in another release (numpy 2.4 / scipy 1.17 moved vector scaling's weights
# in the 12th digit). The fitted values, and every number derived from them, are reproducible to this
# relative tolerance, not to the byte (CONVENTIONS.md, "Reproducibility"; the golden test reads it).
REPRODUCIBLE_TO = 1e-6
# Keys of a calibrator's JSON that describe the solver's run, not the fitted values: another release may
# take other steps (iterations) and stop at another gradient norm below GRADIENT_TOLERANCE.
SOLVER_KEYS = ("gradient_norm", "iterations", "kkt_residual")
DEFAULT_ODIR_LAMBDA = 1e-3
DEFAULT_ODIR_MU = 1e-3
DIRICHLET_MEMORY_LIMIT = 2 << 30  # bytes the dirichlet fit may hold (N x K arrays and K x K parameters)
MAX_OUTER_ITERATIONS = 200  # trust-region iterations; each solves its Newton system by conjugate gradients
ROWS_PER_CHUNK_ELEMENTS = 1 << 20
INITIAL_TRUST_RADIUS = 10.0
POLISH_FROM = 1e-6  # u-gradient norm (times the preconditioner's scale) where gradient-judged Newton steps begin
POLISH_CG_RTOL = 1e-3  # conjugate gradients' relative residual in a polishing Newton step
MAX_POLISH_STEPS = 8
POLISH_TARGET = 1e-10  # those steps go on while the gradient falls, to this norm (certified at 1e-8)
PRECONDITIONER_MASS = 1e-2
REFRESH_AFTER = 40  # conjugate-gradient steps in one trust-region iteration that call for a new preconditioner


# scipy is imported where a fit first needs it, not with this module: the registry of scores loads it,
# and the command starts (--help, a completion) without scipy.
def log_softmax(x, axis):
    from scipy.special import log_softmax as function

    return function(x, axis=axis)


def logsumexp(x, axis):
    from scipy.special import logsumexp as function

    return function(x, axis=axis)


def softmax(x, axis):
    from scipy.special import softmax as function

    return function(x, axis=axis)


def minimum_rows(name: str, n_classes: int) -> int:
    """Fewest validation rows a calibrator is fitted on: one per class for the per-class maps, 3 for ets."""
    return 3 if name == "ets" else max(n_classes, 2)


def _check_rows(name: str, n_val: int, n_classes: int) -> None:
    needed = minimum_rows(name, n_classes)
    if n_val < needed:
        raise SelcalError(f"{name} needs at least {needed} validation rows (K = {n_classes}), got {n_val}: "
                          f"give more validation rows ({said('val')}, a split column or a larger {said('val_fraction')})")


def _chunks(n_rows: int, n_classes: int):
    step = max(1, ROWS_PER_CHUNK_ELEMENTS // max(n_classes, 1))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def _as64(logits) -> np.ndarray:
    return np.ascontiguousarray(logits, dtype=np.float64)


class _ClassLinear:
    """Mean NLL of softmax(z), z_ik = <Θ_k, f_ik> linear in per-class parameters Θ (K x F), plus a
    diagonal quadratic penalty ½ Σ d ⊙ Θ²; its gradient and Hessian-vector products.

    ``shared`` features (N x F, the same for every class: dirichlet) or per-class ones given by a
    (N x K) matrix v with f_ik = (v_ik, 1) (vector scaling).

    The NLL does not change when the same vector a is added to every class's parameters on the
    *gauge* columns J (the shared features, or vector scaling's bias): z_i shifts by a constant. Only
    the small penalty fixes that direction, so the Hessian's smallest eigenvalues (about the penalty,
    1e-6 at λ = 0.01, K = 100) are orders of magnitude below the rest and conjugate gradients crawl.
    The solver therefore minimises the gauge-free objective

        h(Θ) = NLL(Θ) + min_a ½ Σ d ⊙ (Θ + 1 a^T)² + ½ K m^T S m,   m = mean_k Θ_k[J],

    whose minimiser has m = 0 and whose penalty term is the original one at the best gauge a*(Θ), so
    Θ* = Θ̂ + 1 a*(Θ̂)^T minimises the original objective (S, the mean of the classes' curvature blocks
    on J, gives the gauge direction a curvature like the others'). The certificate is the original
    objective's gradient at Θ*. The solver works in u with Θ_k = M_k u_k, M_k = L_k^-T for the Cholesky
    factor L_k of the class's own curvature block of h (block-Jacobi preconditioning: each class's
    curvature, near 0 for a class rarely predicted, is scaled to 1), so the trust-region Newton-CG
    needs few conjugate-gradient steps.
    """

    def __init__(self, labels, penalty_diag, *, shared=None, per_class=None):
        self.labels = labels
        self.shared, self.per_class = shared, per_class
        source = shared if shared is not None else per_class
        self.n, self.k = labels.size, (per_class.shape[1] if per_class is not None else penalty_diag.shape[0])
        self.d = penalty_diag  # K x F
        self.f = penalty_diag.shape[1]
        self.gauge = np.arange(self.f) if shared is not None else np.array([1])
        self.d_gauge = self.d[:, self.gauge]
        self.gauge_total = self.d_gauge.sum(axis=0)
        self.S = np.zeros((self.gauge.size, self.gauge.size))
        self.rows = _chunks(source.shape[0], max(source.shape[1], self.k))
        self.M = np.broadcast_to(np.eye(self.f), (self.k, self.f, self.f))
        self._theta, self._p = None, None
        self.products = 0  # Hessian-vector products so far

    # z and its adjoint in Θ
    def _z(self, theta, rows):
        if self.shared is not None:
            return self.shared[rows] @ theta.T
        return self.per_class[rows] * theta[:, 0] + theta[:, 1]

    def _adjoint(self, g, rows):
        if self.shared is not None:
            return g.T @ self.shared[rows]
        return np.column_stack([np.einsum("ij,ij->j", g, self.per_class[rows]), g.sum(axis=0)])

    def nll(self, theta):
        """Mean NLL at Θ and its gradient (the probabilities are kept for Hessian-vector products)."""
        if self.per_class is not None:
            return self._vector_nll(theta)
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
        return math.fsum(np.concatenate(total)) / self.n, gradient / self.n

    def _vector_nll(self, theta):
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
        return math.fsum(nll) / self.n, gradient / self.n

    def _nll_hessian(self, theta, direction):
        if self._theta is None or not np.array_equal(theta, self._theta):
            self.nll(theta)
        if self.per_class is not None:
            dw, db = direction[:, 0], direction[:, 1]
            a, b, c = self._sums
            s = (self._pv @ dw.astype(np.float32)).astype(np.float64) + self._p @ db.astype(np.float32)
            s32 = s.astype(np.float32)
            out = np.column_stack([a * dw + b * db - (s32 @ self._pv).astype(np.float64),
                                   b * dw + c * db - (s32 @ self._p).astype(np.float64)])
            return out / self.n
        # Dirichlet: two matrix products per chunk (float64: conjugate gradients need exact products).
        out = np.zeros_like(theta)
        for rows, p in zip(self.rows, self._p):
            x = self.shared[rows]
            dz = x @ direction.T
            s = np.einsum("ij,ij->i", p, dz)
            dz -= s[:, None]
            dz *= p
            out += dz.T @ x
        return out / self.n

    def objective(self, theta):
        """The original objective, mean NLL + ½ Σ d ⊙ Θ², and its gradient."""
        value, gradient = self.nll(theta)
        return value + 0.5 * float(np.sum(self.d * theta * theta)), gradient + self.d * theta

    def best_gauge(self, theta):
        """a* minimising ½ Σ d ⊙ (Θ + 1 a^T)² on the gauge columns (0 where they carry no penalty)."""
        weighted = np.einsum("kj,kj->j", self.d_gauge, theta[:, self.gauge])
        return np.divide(-weighted, self.gauge_total, out=np.zeros_like(weighted), where=self.gauge_total > 0)

    def shifted(self, theta):
        """Θ + 1 a*(Θ)^T: the same NLL, the smallest penalty."""
        out = theta.copy()
        out[:, self.gauge] += self.best_gauge(theta)
        return out

    def reduced(self, theta):
        """h(Θ) and its gradient (see the class docstring)."""
        value, gradient = self.nll(theta)
        shifted = self.shifted(theta)
        mean = theta[:, self.gauge].mean(axis=0)
        value += 0.5 * float(np.sum(self.d * shifted * shifted)) + 0.5 * self.k * float(mean @ self.S @ mean)
        gradient = gradient + self.d * shifted
        gradient[:, self.gauge] += self.S @ mean
        return value, gradient

    def _reduced_hessian(self, theta, direction):
        out = self._nll_hessian(theta, direction)
        out += self.d * self.shifted(direction)  # the penalty at the best gauge is a quadratic in Θ
        out[:, self.gauge] += self.S @ direction[:, self.gauge].mean(axis=0)
        return out

    def precondition(self, theta):
        """M_k = L_k^-T from the curvature blocks of h, Σ_i p_ik (1 - p_ik) f_ik f_ik^T / N + diag(d_k) + S/K
        on the gauge columns, at Θ; S is the mean of the NLL blocks on the gauge columns. For shared
        features each block sums only the rows carrying all but 1% of its weight p_ik (1 - p_ik) (few rows
        once the fit is sharp): a preconditioner needs no more, and the Hessian's products stay exact."""
        blocks = np.zeros((self.k, self.f, self.f))
        for rows in self.rows:
            z = self._z(theta, rows)
            p = np.exp(z - logsumexp(z, axis=1)[:, None])
            weight = p * (1.0 - p)
            if self.shared is not None:
                x = self.shared[rows]
                order = np.argsort(-weight, axis=0)
                mass = np.cumsum(np.take_along_axis(weight, order, axis=0), axis=0)
                for c in range(self.k):  # the rows holding all but PRECONDITIONER_MASS of the class's weight
                    kept = order[:np.searchsorted(mass[:, c], (1.0 - PRECONDITIONER_MASS) * mass[-1, c]) + 1, c]
                    scaled = x[kept] * np.sqrt(weight[kept, c])[:, None]
                    blocks[c] += scaled.T @ scaled
            else:
                v = self.per_class[rows]
                blocks[:, 0, 0] += np.einsum("ij,ij->j", weight, v * v)
                blocks[:, 0, 1] += np.einsum("ij,ij->j", weight, v)
                blocks[:, 1, 1] += weight.sum(axis=0)
        blocks[:, 1, 0] = blocks[:, 0, 1] if self.shared is None else blocks[:, 1, 0]
        blocks /= self.n
        gauge = np.ix_(self.gauge, self.gauge)
        self.S = blocks[(slice(None),) + gauge].mean(axis=0)
        self.S += 1e-12 * (1.0 + np.trace(self.S)) * np.eye(self.gauge.size)
        for c in range(self.k):
            blocks[c][gauge] += self.S / self.k
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
        value, gradient = self.reduced(self._theta_of(u))
        return value, self._u_of(gradient)

    def hessian_vector(self, u, direction):
        self.products += 1
        return self._u_of(self._reduced_hessian(self._theta_of(u), self._theta_of(direction)))

    def _polish(self, u):
        """Newton's method on ∇h = 0 from u: each step solves H p = -g by scipy's conjugate gradients (relative
        residual 1e-3) and is kept while the gradient's norm falls, down to 1e-10; the objective's value is not
        consulted (its changes there are below its rounding). Returns u, the certified Θ*, its objective,
        gradient norm and the number of steps."""
        from scipy.sparse import linalg as sparse_linalg

        size = u.size
        theta, value, norm, steps = self._certify(u)
        _, gradient_u = self.value_and_gradient(u)  # last: the Hessian's products use the probabilities at u
        while norm >= POLISH_TARGET and steps < MAX_POLISH_STEPS:
            hessian = sparse_linalg.LinearOperator((size, size), matvec=lambda p, u=u: self.hessian_vector(u, p),
                                                   dtype=np.float64)
            step, _ = sparse_linalg.cg(hessian, -gradient_u, rtol=POLISH_CG_RTOL, atol=0.0, maxiter=10 * size)
            candidate = u + step
            certified = self._certify(candidate)  # (it moves the Hessian's cache: set again just below)
            _, candidate_gradient = self.value_and_gradient(candidate)  # last: the cache at the candidate
            if not np.linalg.norm(candidate_gradient) < np.linalg.norm(gradient_u):
                break
            u, gradient_u, steps = candidate, candidate_gradient, steps + 1
            theta, value, norm, _ = certified
        return u, theta, value, norm, steps

    def _certify(self, u):
        theta = self.shifted(self._theta_of(u))
        value, gradient = self.objective(theta)
        return theta, value, float(np.linalg.norm(gradient)), 0

    def solve(self, theta0, name: str, hint: str):
        """Minimise h in u in two phases: scipy's trust-region Newton-CG (``trust-ncg``) until the u-gradient
        is below 1e-6 / ‖L‖, where each step's decrease of the objective is still well above its rounding
        and the trust region's ratio test can be trusted; then Newton steps judged by the gradient's norm
        (:meth:`_polish`). The preconditioner is rebuilt at the current point when one trust-region
        iteration needed more than ``REFRESH_AFTER`` conjugate-gradient steps (the curvature has moved
        away from the one it was built for), and before polishing. Certified when the original
        objective's gradient 2-norm at Θ* is below 1e-8; otherwise the trust region runs again to a 100
        times tighter tolerance."""
        gauge_columns = np.zeros(self.f)
        gauge_columns[self.gauge] = 1.0
        theta = theta0 - theta0.mean(axis=0) * gauge_columns  # the same model, no gauge component
        iterations, tighten, fresh = 0, 1.0, False
        for _ in range(MAX_OUTER_ITERATIONS):
            if not fresh:
                self.precondition(theta)
            u = np.linalg.solve(self.M, theta[:, :, None])[:, :, 0].ravel()
            counted = [self.products]

            def refresh(intermediate_result, counted=counted):
                used, counted[0] = self.products - counted[0], self.products
                if used > REFRESH_AFTER:
                    raise StopIteration

            from scipy import optimize

            result = optimize.minimize(self.value_and_gradient, u, jac=True, hessp=self.hessian_vector,
                                       method="trust-ncg", callback=refresh,
                                       options={"gtol": tighten * POLISH_FROM / max(self.L_norm, 1.0),
                                                "maxiter": MAX_OUTER_ITERATIONS - iterations,
                                                "initial_trust_radius": INITIAL_TRUST_RADIUS})
            iterations += int(result.nit)
            theta, fresh = self._theta_of(result.x), False
            if result.status == 99 and iterations < MAX_OUTER_ITERATIONS:  # stopped for a new preconditioner
                continue
            self.precondition(theta)
            u = np.linalg.solve(self.M, theta[:, :, None])[:, :, 0].ravel()
            u, theta_star, value, norm, steps = self._polish(u)
            theta, fresh, iterations = self._theta_of(u), True, iterations + steps
            if norm < GRADIENT_TOLERANCE or iterations >= MAX_OUTER_ITERATIONS or tighten < 1e-4:
                break
            tighten /= 100.0
        if not norm < GRADIENT_TOLERANCE:
            raise SelcalError(f"{name}: the optimum could not be certified within {MAX_OUTER_ITERATIONS} trust-region "
                              f"iterations (gradient norm {norm:.2g} > {GRADIENT_TOLERANCE:g}); {hint}")
        return theta_star, value, norm, iterations


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
        theta0, "vector", "the validation rows may be separable (none misclassified, or a class never predicted), "
                   "so w grows without bound: give more validation rows or a larger --odir-mu")
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


def check_dirichlet_size(n_val: int, n_classes: int) -> None:
    """Refuse, in one line, a dirichlet fit that would hold more than :data:`DIRICHLET_MEMORY_LIMIT` bytes
    (asked before any fit of the run, so the refusal never comes after minutes of other fits)."""
    needed = dirichlet_memory(n_val, n_classes)
    if needed > DIRICHLET_MEMORY_LIMIT:
        raise SelcalError(f"dirichlet: K = {n_classes} classes with {n_val} validation rows needs about "
                          f"{needed / 2**30:.1f} GiB (K x K weights), above the {DIRICHLET_MEMORY_LIMIT / 2**30:.0f} "
                          f"GiB limit: use vector, ets or temp for this many classes")


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
    check_dirichlet_size(n, k)
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
        # least squares: with T = 1 two components are equal and the system is singular but consistent
        step = np.linalg.lstsq(kkt, np.concatenate([-gradient[idx], [0.0]]), rcond=None)[0][:-1]
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
    from scipy import optimize

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
ISOTONIC_CLASSES_PER_BLOCK = 128


@dataclass
class IsotonicFit:
    """Per class k, a non-decreasing map of p_k = softmax(v)_k, linear between its thresholds, clipped."""

    thresholds: list[np.ndarray] = field(repr=False)
    values: list[np.ndarray] = field(repr=False)

    def probabilities(self, logits) -> np.ndarray:
        p = np.ascontiguousarray(softmax(_as64(logits), axis=1).T)  # K x N: each class's column contiguous
        for k, (x, y) in enumerate(zip(self.thresholds, self.values)):
            p[k] = np.interp(p[k], x, y)
        # Summed in sorted order, so the total depends only on the row's set of values: two rows whose
        # classes map to the same fitted steps in another order get the same bits, and stay a tie.
        # In class order, rounding split such ties (2 pairs on calibrator_cifar10_resnet50_ce's test
        # rows), which moved isotonic's AURC by 7.5e-8 from its exact value.
        total = np.sort(p.T, axis=1).sum(axis=1)
        uniform = np.full((p.shape[1], p.shape[0]), 1.0 / p.shape[0])
        return np.divide(p.T, total[:, None], out=uniform, where=total[:, None] != 0)

    def log_probabilities(self, logits) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities(logits))

    def params(self) -> dict:
        return {"thresholds": [len(x) for x in self.thresholds]}


def _pool(x_sorted: np.ndarray) -> np.ndarray:
    """Group index of each sorted x: a group starts where x - (the group's first x) >= 1e-15 (scikit-learn).

    A gap of 1e-15 or more always starts a group; a run of smaller gaps is one group unless it spans
    1e-15 or more (then it is walked, one search per group), so the walk touches only dense runs.
    """
    starts = np.empty(x_sorted.size, dtype=bool)
    starts[0] = True
    starts[1:] = np.diff(x_sorted) >= ISOTONIC_POOLING
    run_starts = np.flatnonzero(starts)
    run_ends = np.r_[run_starts[1:], x_sorted.size]
    wide = (run_ends - run_starts > 1) & (x_sorted[run_ends - 1] - x_sorted[run_starts] >= ISOTONIC_POOLING)
    for start, end in zip(run_starts[wide], run_ends[wide]):
        while True:
            step = int(np.searchsorted(x_sorted[start:end] - x_sorted[start], ISOTONIC_POOLING))
            if start + step >= end:
                break
            start += step
            starts[start] = True
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
    for block in range(0, k, ISOTONIC_CLASSES_PER_BLOCK):  # a block of classes' columns, transposed and sorted at once
        columns = np.ascontiguousarray(p[:, block:block + ISOTONIC_CLASSES_PER_BLOCK].T)
        orders = np.argsort(columns, axis=1)  # the order inside a run of equal values changes no pooled mean
        for c, (column, order) in enumerate(zip(columns, orders), start=block):
            _fit_one_isotonic(column[order], (labels[order] == c).astype(np.float64), thresholds, values)
    return IsotonicFit(thresholds, values)


def _fit_one_isotonic(x, y, thresholds, values):
    """Pool the sorted x closer than 1e-15 (the order inside a pool changes no mean), fit, append."""
    group = _pool(x)
    count = np.bincount(group).astype(np.float64)
    first = np.flatnonzero(np.r_[True, np.diff(group) > 0])
    mean = np.bincount(group, weights=y) / count
    from scipy import optimize

    fitted = optimize.isotonic_regression(mean, weights=count, increasing=True).x
    keep = np.ones(fitted.size, dtype=bool)  # inner points of a flat run change no interpolated value
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    thresholds.append(x[first][keep])
    values.append(fitted[keep])
