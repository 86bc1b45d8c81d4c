"""The numerical core of ``selcal threshold`` (CONVENTIONS.md, "Deployment thresholds with a guarantee").

Pure functions of arrays: a confidence score and whether each prediction is correct on the
*calibration* rows in, the lowest threshold θ (accept s >= θ) whose selective risk on new data
is at most a target r with probability at least 1 - δ out. The candidates are the operating
points of :func:`selcal.metrics.selective.risk_coverage` (one per tie group: ties are accepted or
rejected together); nothing here sorts.

- :func:`sgr`: Geifman & El-Yaniv 2017, Algorithm 1 (selection with guaranteed risk) as printed:
  a binary search over the n calibration rows, ⌈log2 n⌉ tests each at δ / ⌈log2 n⌉ with the exact
  binomial tail bound B*; a row's test is its tie group's.
- :func:`ltt`: Learn-then-Test (Angelopoulos et al. 2021) with fixed-sequence testing over the
  thresholds of the coverages 1%, 2%, ..., 100%, exact binomial p-values.
- :func:`empirical` (no guarantee): the threshold of ``cov@r`` on the calibration rows, what
  the guarantee is measured against.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

from ..metrics.selective import RiskCoverage, risk_coverage
from ..options import DEFAULT_DELTA, DEFAULT_RISK, THRESHOLD_METHODS

__all__ = [
    "METHODS",
    "DEFAULT_RISK",
    "DEFAULT_DELTA",
    "DEFAULT_METHOD",
    "LTT_COVERAGES",
    "binomial_upper_bound",
    "binomial_p_value",
    "Candidate",
    "Certificate",
    "Applied",
    "sgr",
    "ltt",
    "empirical",
    "certify",
    "apply_threshold",
    "minimum_rows",
    "ltt_coverages",
    "check_level",
    "rounds_to_a_bound",
    "check_delta",
    "sgr_steps",
    "DELTA_FLOOR",
]

METHODS = THRESHOLD_METHODS
DEFAULT_METHOD = THRESHOLD_METHODS[0]
LTT_COVERAGES = tuple(range(1, 101))  # percent, tested in this order
# The smallest δ taken: SGR splits δ into at most 64 tests (⌈log2 n⌉ for n < 2**64 rows), and a level
# below float64's smallest normal number (2.2e-308) would lose its relative precision.
DELTA_FLOOR = 1e-300


def check_level(value, name: str) -> float:
    """``value`` as a float strictly inside (0, 1), else ValueError naming ``name`` (a number that
    rounds to 0 or 1 in float64, such as ``"1e-400"``, is said to: :func:`rounds_to_a_bound`).

    Examples
    --------
    >>> check_level("0.05", "risk")
    0.05
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0 < number < 1:  # also refuses NaN
        rounded = f" (it rounds to {number:g} in float64)" if rounds_to_a_bound(value, number) else ""
        raise ValueError(f"{name} must be in (0, 1), e.g. 0.05; got {value!r}{rounded}")
    return number


def rounds_to_a_bound(text, number: float | None) -> bool:
    """``text`` names a number strictly inside (0, 1) that float64 rounds to 0 or 1 (``"1e-400"``,
    ``"1e-400%"``); ``number`` is its float. A written ``"0"``, ``"1"`` or ``"100%"`` is the bound
    itself, not a rounding of it.

    Examples
    --------
    >>> rounds_to_a_bound("1e-400", 0.0), rounds_to_a_bound("0", 0.0), rounds_to_a_bound(0.0, 0.0)
    (True, False, False)
    """
    if not isinstance(text, str) or number not in (0.0, 1.0):
        return False
    written = text.strip()
    try:
        exact = Decimal(written[:-1]) / 100 if written.endswith("%") else Decimal(written)
    except InvalidOperation:
        return False
    return 0 < exact < 1

def check_delta(value) -> float:
    """δ as :func:`check_level`, and at least :data:`DELTA_FLOOR` (1e-300).

    Examples
    --------
    >>> check_delta(1e-300)
    1e-300
    """
    delta = check_level(value, "delta")
    if delta < DELTA_FLOOR:
        raise ValueError(f"delta must be at least {DELTA_FLOOR:g} (a guarantee with probability 1 - {delta:.3g}): "
                         "SGR splits delta into up to 64 tests, and a level below float64's smallest normal "
                         f"number ({sys.float_info.min:.3g}) loses its precision; got {value!r}")
    return delta


def sgr_steps(n: int) -> int:
    """k = max(1, ⌈log2 n⌉), the number of tests SGR runs on n calibration rows: a count fixed by n
    alone, before any score is seen (exact for every n, unlike ``math.log2`` of a large int).

    Examples
    --------
    >>> sgr_steps(1), sgr_steps(2), sgr_steps(5000), sgr_steps(4096), sgr_steps(4097)
    (1, 1, 13, 12, 13)
    """
    return max(1, (int(n) - 1).bit_length())


def split_level(delta: float, parts: int) -> float:
    """δ / parts rounded down, so that ``parts`` tests at this level never sum to more than δ
    (the union bound holds in exact arithmetic, not only to the last bit).

    Examples
    --------
    >>> split_level(0.1, 13) * 13 <= 0.1
    True
    """
    level = delta / parts
    while Fraction(level) * parts > Fraction(delta):
        level = math.nextafter(level, 0.0)
    return level


def binomial_upper_bound(errors, n, delta):
    """B*(e, n, δ): the b in [0, 1] with P(Binom(n, b) <= e) = δ, the exact binomial tail
    bound of Geifman & El-Yaniv 2017 (Lemma 3.1) solved for the risk.

    It is the one-sided Clopper-Pearson upper limit at level 1 - δ: P(Binom(n, b) <= e) =
    1 - I_b(e + 1, n - e), so b is the inverse of the regularised incomplete beta function,
    computed from its complement (``scipy.stats.beta.isf``) so that a small δ keeps its
    precision. 1 when every accepted prediction is wrong (e = n). Vectorised over arrays.

    Parameters
    ----------
    errors : int or array of int
        Errors e among the accepted calibration rows, 0 <= e <= n.
    n : int or array of int
        Accepted calibration rows, n >= 1.
    delta : float
        Confidence parameter in (0, 1).

    Returns
    -------
    float or ndarray of float64

    References
    ----------
    Geifman & El-Yaniv, "Selective classification for deep neural networks", NeurIPS 2017,
    Lemma 3.1 and Algorithm 1; Clopper & Pearson, Biometrika 1934.

    Examples
    --------
    >>> round(float(binomial_upper_bound(0, 10, 0.1)), 6)  # 1 - 0.1 ** (1 / 10)
    0.205672
    >>> float(binomial_upper_bound(3, 3, 0.1))
    1.0
    """
    from scipy import stats  # here: importing scipy.stats costs more than selcal's own import

    errors = np.asarray(errors, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = stats.beta.isf(delta, errors + 1.0, np.maximum(n - errors, 1.0))
    bound = np.where(errors >= n, 1.0, bound)
    return float(bound) if bound.ndim == 0 else bound


def binomial_p_value(errors, n, risk):
    """P(Binom(n, r) <= e): the exact p-value of the null hypothesis "selective risk > r"
    given e errors among n accepted rows (Angelopoulos et al. 2021, the binomial tail p-value).

    Examples
    --------
    >>> float(binomial_p_value(0, 2, 0.5))
    0.25
    """
    from scipy import stats

    value = stats.binom.cdf(np.asarray(errors), np.asarray(n), risk)
    return float(value) if np.ndim(value) == 0 else value


@dataclass(frozen=True)
class Candidate:
    """One candidate threshold a method tested: operating point ``index`` of the curve,
    ``accepted`` rows and ``errors`` among them, the ``statistic`` (SGR: the bound B*; LTT:
    the p-value) and whether it ``passed``."""

    index: int
    accepted: int
    errors: int
    statistic: float
    passed: bool


class _Selection:
    """Coverage and selective risk of ``accepted`` rows of ``n``, ``errors`` among them."""

    n: int
    accepted: int
    errors: int

    @property
    def coverage(self) -> float | None:
        """Fraction of the rows accepted; None when there is no row (a group without evaluation rows)."""
        return self.accepted / self.n if self.n else None

    @property
    def risk(self) -> float | None:
        """Selective risk; None when nothing is accepted."""
        return self.errors / self.accepted if self.accepted else None


@dataclass(frozen=True)
class Certificate(_Selection):
    """The threshold a method chose on the calibration rows, and what it certifies.

    Attributes
    ----------
    method : str
        ``sgr``, ``ltt`` or ``empirical``.
    risk_target, delta : float
        The target r and the confidence parameter δ (the guarantee holds with probability
        at least 1 - δ; ``empirical`` guarantees nothing).
    threshold : float or None
        Accept a new input when its score s >= threshold; None: abstain on everything.
    n : int
        Calibration rows.
    accepted, errors : int
        Calibration rows with s >= threshold, and the errors among them (0 when abstaining).
    bound : float or None
        The certified upper bound on the selective risk: SGR's B* of the chosen threshold
        (< r), the target r for LTT (what its test certifies), None when abstaining or for
        ``empirical``.
    tests : tuple of Candidate
        Every candidate tested, in the order tested.
    curve : RiskCoverage
        The calibration rows' operating points the candidates were taken from.
    """

    method: str
    risk_target: float
    delta: float
    threshold: float | None
    n: int
    accepted: int
    errors: int
    bound: float | None
    tests: tuple[Candidate, ...]
    curve: RiskCoverage

    @property
    def abstain_all(self) -> bool:
        return self.threshold is None


@dataclass(frozen=True)
class Applied(_Selection):
    """A threshold applied to rows: ``n`` rows, ``accepted`` of them, ``errors`` among those."""

    n: int
    accepted: int
    errors: int


def _curve(score, correct) -> RiskCoverage:
    return score if isinstance(score, RiskCoverage) else risk_coverage(score, correct)


def _certificate(method, risk, delta, curve: RiskCoverage, chosen: int | None, bound, tests) -> Certificate:
    if chosen is None:
        return Certificate(method, risk, delta, None, curve.n, 0, 0, None, tuple(tests), curve)
    return Certificate(method, risk, delta, float(curve.thresholds[chosen]), curve.n, int(curve.accepted[chosen]),
                       int(curve.errors[chosen]), bound, tuple(tests), curve)


def sgr(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA) -> Certificate:
    """Selection with guaranteed risk: Geifman & El-Yaniv 2017, Algorithm 1, as printed.

    The n calibration rows are sorted by ascending score (index z = 1 .. n); with z_min = 1,
    z_max = n, each of k = ⌈log2 n⌉ steps (at least 1) tests z = ⌈(z_min + z_max) / 2⌉: the rule
    "accept s >= θ" with θ the score of row z, at level δ' = δ / k. It passes when
    B*(e, a, δ') < r (a accepted rows, e errors among them); then z_max = z (more coverage next),
    else z_min = z. k depends on n alone, so the union bound over the k tests gives
    P(risk > bound) <= δ.

    Ties are accepted together: "accept s >= θ" accepts every row tied with row z, so the test of
    row z is the test of its tie group, an operating point of the risk-coverage curve (on
    tie-free scores, exactly the printed step). As printed, z = 1 (every row) is never tested, so
    on tie-free scores the lowest-scored row is always rejected.

    The answer is the passing test of highest coverage, which is the last one to pass (each
    pass moves the search to higher coverage), with its bound B* (< r); the paper outputs the
    last test, which may have failed: selcal never returns a threshold whose bound is not below
    r. When no test passes, abstain on everything.

    Parameters
    ----------
    score : array-like of float, shape (N,), or RiskCoverage
        Confidence score of the calibration rows (higher = more confident), or their curve.
    correct : array-like of bool, shape (N,)
        Whether each calibration prediction is correct (unused when ``score`` is a curve).
    risk : float
        Target selective risk r, in (0, 1).
    delta : float
        Confidence parameter δ, in [1e-300, 1).

    Returns
    -------
    Certificate
        ``tests`` holds the k steps in order (a tie group met again is listed again).

    References
    ----------
    Geifman & El-Yaniv, "Selective classification for deep neural networks", NeurIPS 2017,
    Algorithm 1 (SGR) and Lemma 3.1; the authors' code (geifmany/selective_deep_learning,
    ``risk_control.py``) takes the same midpoints, 0-based.

    Examples
    --------
    >>> cert = sgr([4, 4, 3, 3, 2, 2, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0], risk=0.4, delta=0.5)
    >>> cert.threshold, cert.accepted, round(cert.bound, 4), [test.accepted for test in cert.tests]
    (2.0, 6, 0.2582, [4, 6, 8])
    """
    risk, delta = check_level(risk, "risk"), check_delta(delta)
    curve = _curve(score, correct)
    n = curve.n
    steps = sgr_steps(n)
    level = split_level(delta, steps)
    z_min, z_max = 1, n
    tests: list[Candidate] = []
    outcomes: dict[int, Candidate] = {}
    chosen = chosen_bound = None
    for _ in range(steps):
        z = (z_min + z_max + 1) // 2  # ⌈(z_min + z_max) / 2⌉
        # row z of the ascending order is row n - z + 1 of the descending one: its tie group is the
        # first operating point that accepts at least that many rows
        index = int(np.searchsorted(curve.accepted, n - z + 1, side="left"))
        if index not in outcomes:
            accepted, errors = int(curve.accepted[index]), int(curve.errors[index])
            bound = binomial_upper_bound(errors, accepted, level)
            outcomes[index] = Candidate(index, accepted, errors, bound, bool(bound < risk))
        test = outcomes[index]
        tests.append(test)
        if test.passed:
            z_max = z
            chosen, chosen_bound = index, test.statistic
        else:
            z_min = z
    return _certificate("sgr", risk, delta, curve, chosen, chosen_bound, tests)


def ltt_coverages(n: int, risk: float, delta: float, testable_only: bool = False) -> tuple[int, ...]:
    """The coverages (percent) LTT tests for ``n`` calibration rows, in order.

    1, 2, ..., 100 (CONVENTIONS.md). With ``testable_only``, from the first c whose threshold
    accepts at least :func:`minimum_rows` rows (⌈c n / 100⌉ >= m): a hypothesis on fewer rows
    has a p-value above δ whatever the data (even with no error, (1 - r)^a > δ), so testing it
    can only stop the sequence. That start depends on n, r and δ alone, never on the scores, so
    the guarantee holds; but it is not the default, because it makes the answer non-monotone:
    a larger δ (or r) moves the start to an earlier coverage whose hypothesis may fail, and
    then gives a *lower* coverage (``tests/threshold/test_threshold_guarantee.py`` has the case).

    Examples
    --------
    >>> ltt_coverages(5000, 0.01, 0.1)[0], ltt_coverages(5000, 0.01, 0.1, testable_only=True)[0]
    (1, 5)
    """
    if not testable_only:
        return LTT_COVERAGES
    rows = minimum_rows(risk, delta, "ltt")
    return tuple(c for c in LTT_COVERAGES if -(-c * n // 100) >= rows)


def _coverage_points(curve: RiskCoverage, coverages) -> np.ndarray:
    """For each c %, the first operating point whose coverage is at least c % (exact
    integer comparison, as ``risk@c``)."""
    wanted = np.asarray(coverages, dtype=np.int64) * curve.n  # accepted * 100 >= c * n
    return np.searchsorted(curve.accepted * 100, wanted, side="left")


def ltt(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA,
        testable_only: bool = False) -> Certificate:
    """Learn-then-Test with fixed-sequence testing (Angelopoulos et al. 2021).

    The hypotheses are the thresholds of the coverages 1%, 2%, ..., 100% of the calibration
    rows (for c %, the first operating point whose coverage is at least c %; a tie group that
    spans several percents is one hypothesis, tested once); ``testable_only`` starts at the
    first coverage with enough rows for a test to reject (see :func:`ltt_coverages`: valid, but
    not monotone in δ and r). In that order, each null
    "selective risk > r" is tested with the exact binomial p-value P(Binom(a, r) <= e) and
    rejected when it is at most δ; the sequence stops at the first hypothesis not rejected.
    The answer is the last rejected one (the highest coverage), with the certified bound r;
    when the first is not rejected, abstain on everything. Fixed-sequence testing controls
    the family-wise error at δ without splitting it.

    Parameters and Returns as :func:`sgr`.

    References
    ----------
    Angelopoulos, Bates, Candès, Jordan & Lei, "Learn then Test: calibrating predictive
    algorithms to achieve risk control", 2021 (fixed-sequence testing, binomial p-values).

    Examples
    --------
    >>> cert = ltt([4, 4, 3, 3, 2, 2, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0], risk=0.3, delta=0.5)
    >>> cert.threshold, cert.accepted, [round(t.statistic, 4) for t in cert.tests]
    (2.0, 6, [0.49, 0.2401, 0.1176, 0.5518])
    """
    risk, delta = check_level(risk, "risk"), check_delta(delta)
    curve = _curve(score, correct)
    coverages = ltt_coverages(curve.n, risk, delta, testable_only)
    points = np.unique(_coverage_points(curve, coverages))  # increasing coverage; duplicates tested once
    if not points.size:  # too few rows for any test
        return _certificate("ltt", risk, delta, curve, None, None, ())
    p_values = binomial_p_value(curve.errors[points], curve.accepted[points], risk)
    tests: list[Candidate] = []
    chosen = None
    for index, p_value in zip(points.tolist(), np.atleast_1d(p_values).tolist()):
        passed = p_value <= delta
        tests.append(Candidate(index, int(curve.accepted[index]), int(curve.errors[index]), float(p_value), passed))
        if not passed:
            break
        chosen = index
    return _certificate("ltt", risk, delta, curve, chosen, risk if chosen is not None else None, tests)


def empirical(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA) -> Certificate:
    """The threshold of ``cov@r`` on the calibration rows: the operating point of highest
    coverage whose calibration risk is at most r. No guarantee (``delta`` is ignored, ``bound``
    is None); what :func:`sgr` and :func:`ltt` are measured against.

    Examples
    --------
    >>> empirical([4, 4, 3, 3, 2, 2, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0], risk=0.25).accepted
    8
    """
    risk = check_level(risk, "risk")
    curve = _curve(score, correct)
    feasible = np.flatnonzero(curve.risk <= risk)
    chosen = int(feasible[-1]) if feasible.size else None
    return _certificate("empirical", risk, delta, curve, chosen, None, ())


_METHODS = {"sgr": sgr, "ltt": ltt, "empirical": empirical}


def certify(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA,
            method: str = DEFAULT_METHOD) -> Certificate:
    """The threshold of ``method`` (``sgr``, ``ltt`` or ``empirical``); see those functions."""
    if method not in _METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return _METHODS[method](score, correct, risk=risk, delta=delta)


def apply_threshold(score, correct, threshold: float | None) -> Applied:
    """Coverage and selective risk of "accept s >= threshold" on other rows (None: accept none).

    Examples
    --------
    >>> applied = apply_threshold([0.9, 0.5, 0.2], [True, False, True], 0.5)
    >>> applied.coverage, applied.risk
    (0.6666666666666666, 0.5)
    """
    score = np.asarray(score, dtype=np.float64).ravel()
    correct = np.asarray(correct, dtype=bool).ravel()
    if threshold is None:
        return Applied(int(score.size), 0, 0)
    accepted = score >= threshold
    return Applied(int(score.size), int(np.count_nonzero(accepted)), int(np.count_nonzero(accepted & ~correct)))


def minimum_rows(risk: float, delta: float, method: str = DEFAULT_METHOD) -> int:
    """The fewest calibration rows with which ``method`` can certify any threshold at all.

    The most favourable calibration set of m rows has no error and one tie group. LTT tests it
    once at δ: certified when (1 - r)^m <= δ. SGR tests it at δ / k, k = ⌈log2 m⌉ (the count
    depends on m, not on the scores): certified when B*(0, m, δ / k) < r, i.e. (1 - r)^m < δ / k.
    Fewer rows can never give a guarantee, whatever their scores. (For SGR a few more rows can
    fail again where k steps up at a power of two; the answer is then "abstain", not a refusal.)

    Exact for every r and δ: a count beyond 2**53 (r ~ 1e-15 or less) comes from the closed form
    in exact rationals, and is astronomically large (``minimum_rows(5e-324, 0.1)`` has 324 digits).

    Examples
    --------
    >>> minimum_rows(0.05, 0.1, "sgr"), minimum_rows(0.05, 0.1, "ltt"), minimum_rows(0.5, 0.25, "ltt")
    (83, 45, 2)
    """
    risk, delta = check_level(risk, "risk"), check_delta(delta)
    if method == "ltt":
        return _fewest_rows(lambda m: binomial_p_value(0, m, risk) <= delta, delta, risk, 1, strict=False)
    steps = 1
    while True:  # the bands of m with one k: [1, 2], [3, 4], [5, 8], ...
        low, high = (1 if steps == 1 else 2 ** (steps - 1) + 1), 2 ** steps
        level = split_level(delta, steps)
        fewest = _fewest_rows(lambda m: binomial_upper_bound(0, m, level) < risk, level, risk, low, strict=True)
        if fewest <= high:
            return fewest
        steps += 1


def _fewest_rows(certified, level: float, risk: float, start: int, strict: bool) -> int:
    """The smallest m >= ``start`` with ``certified(m)`` (monotone in m): near the closed form
    m = log(level) / log(1 - r) (strictly above it when ``strict``), confirmed by ``certified``
    itself so that it agrees with the test to the last bit; beyond 2**53 the closed form alone."""
    ratio = Fraction(math.log(level)) / Fraction(math.log1p(-risk))  # exact: no overflow at r = 5e-324
    estimate = max(start, math.floor(ratio) + 1 if strict else math.ceil(ratio))
    if estimate >= 2 ** 53:  # more rows than any file holds: the closed form is enough
        return estimate
    hi, step = estimate, 1  # a certified count, found by doubling steps up from the estimate
    while not certified(hi):
        hi, step = hi + step, step * 2
    lo, step = hi - 1, 1  # an uncertified count (start - 1 counts as one), by doubling steps down
    while lo >= start and certified(lo):
        hi, lo, step = lo, max(start - 1, lo - step), step * 2
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if certified(middle):
            hi = middle
        else:
            lo = middle
    return hi
