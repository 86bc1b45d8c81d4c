"""Brute-force references for the deployment thresholds (CONVENTIONS.md, "Deployment thresholds
with a guarantee"), sharing nothing with ``selcal/threshold.py`` or ``selcal/metrics/selective.py``.

* The binomial tail is summed term by term in exact rationals (``math.comb``, ``Fraction``),
  and B* is found by bisection on that sum (60 halvings of [0, 1]).
* The candidates are the distinct scores (highest first), each accepting s >= t, counted by a
  loop over the rows.
* SGR is Algorithm 1 of Geifman & El-Yaniv 2017 transcribed line by line: the m rows sorted by
  *ascending* score (1-based z), z_min = 1, z_max = m, k = ⌈log2 m⌉ steps of
  z = ⌈(z_min + z_max)/2⌉, θ = κ(x_z), g accepts κ >= θ (so rows tied with x_z too), the bound
  B*(r̂, δ/⌈log2 m⌉, g(S_m)) by bisection on the exact tail; b* < r* moves z_max to z, else z_min.
* LTT walks c = 1 .. 100 and finds, for each, the first candidate whose accepted count is at
  least c % of the rows.
"""

from __future__ import annotations

import math
from fractions import Fraction


def binomial_tail(errors: int, n: int, b) -> Fraction:
    """P(Binom(n, b) <= errors), summed exactly."""
    b = Fraction(b)
    return sum((math.comb(n, j) * b**j * (1 - b) ** (n - j) for j in range(errors + 1)), Fraction(0))


def upper_bound(errors: int, n: int, delta: float) -> float:
    """The b with binomial_tail(errors, n, b) = delta, by bisection on the exact tail."""
    if errors >= n:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if binomial_tail(errors, n, middle) > Fraction(delta):
            low = middle
        else:
            high = middle
    return (low + high) / 2


def candidates(score, correct):
    """[(threshold, accepted, errors)] for every distinct score, highest first, by counting."""
    out = []
    for t in sorted(set(float(s) for s in score), reverse=True):
        accepted = sum(1 for s in score if s >= t)
        errors = sum(1 for s, c in zip(score, correct) if s >= t and not c)
        out.append((t, accepted, errors))
    return out


def algorithm_one(score, correct, risk, delta, bound_of=None):
    """Every step of Algorithm 1 as printed: [(z, theta, accepted, errors, bound, passed)], k of them.
    ``bound_of(errors, n, delta)`` replaces the exact bisection (too slow beyond a few hundred rows)."""
    m = len(score)
    order = sorted(range(m), key=lambda i: score[i])  # line 2: sort S_m by kappa (ascending)
    k = max(1, math.ceil(math.log2(m)))  # line 4 (k = 0 for m = 1 would test nothing: one test)
    z_min, z_max = 1, m  # line 3
    steps = []
    for _ in range(k):
        z = math.ceil(Fraction(z_min + z_max, 2))  # line 5
        theta = score[order[z - 1]]  # line 6
        accepted = [i for i in range(m) if score[i] >= theta]  # line 7: g_i(x) = 1 iff kappa(x) >= theta
        errors = sum(1 for i in accepted if not correct[i])  # line 8: r_i = errors / accepted
        bound = (bound_of or upper_bound)(errors, len(accepted), delta / k)  # line 9
        passed = bound < risk  # line 10
        steps.append((z, float(theta), len(accepted), errors, bound, passed))
        if passed:
            z_max = z  # line 11
        else:
            z_min = z  # line 13
    return steps


def sgr(score, correct, risk, delta):
    """(threshold or None, bound or None) of Algorithm 1: its last passing step (the paper outputs
    the last step, passed or not; selcal never outputs a step whose bound is not below r)."""
    passed = [step for step in algorithm_one(score, correct, risk, delta) if step[5]]
    return (None, None) if not passed else (passed[-1][1], passed[-1][4])


def ltt(score, correct, risk, delta, testable_only=False):
    """threshold or None of fixed-sequence testing over the coverages 1 .. 100 %; with
    ``testable_only`` from the first whose ceil(c n / 100) rows could be rejected with no error
    ((1 - r)^a <= delta)."""
    points = candidates(score, correct)
    n = len(score)
    fewest = 1
    while testable_only and (1 - Fraction(risk)) ** fewest > Fraction(delta):
        fewest += 1
    chosen = None
    tested = set()
    for c in range(1, 101):
        if math.ceil(Fraction(c * n, 100)) < fewest:
            continue
        point = next(p for p in points if p[1] * 100 >= c * n)
        if point[0] in tested:
            continue
        tested.add(point[0])
        threshold, accepted, errors = point
        if binomial_tail(errors, accepted, Fraction(risk)) > Fraction(delta):
            break
        chosen = threshold
    return chosen
