"""Brute-force references for the deployment thresholds (CONVENTIONS.md, "Deployment thresholds
with a guarantee"), sharing nothing with ``selcal/threshold.py`` or ``selcal/metrics/selective.py``.

* The binomial tail is summed term by term in exact rationals (``math.comb``, ``Fraction``),
  and B* is found by bisection on that sum (60 halvings of [0, 1]).
* The candidates are the distinct scores (highest first), each accepting s >= t, counted by a
  loop over the rows.
* SGR is Algorithm 1 of Geifman & El-Yaniv 2017 as printed, in its own index z over the
  candidates sorted by *ascending* score (z = 1 accepts everything), with z_min = 0, z_max = G.
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


def sgr(score, correct, risk, delta):
    """(threshold or None, bound or None) of Algorithm 1 over the distinct scores."""
    points = candidates(score, correct)[::-1]  # ascending score: z = 1 is the lowest threshold
    g = len(points)
    k = max(1, math.ceil(math.log2(g)))
    z_min, z_max = 0, g
    best = None
    seen = set()
    for _ in range(k):
        z = math.ceil((z_min + z_max) / 2)
        if z in seen:
            break
        seen.add(z)
        threshold, accepted, errors = points[z - 1]
        bound = upper_bound(errors, accepted, delta / k)
        if bound < risk:
            z_max = z
            if best is None or z < best[0]:
                best = (z, threshold, bound)
        else:
            z_min = z
    return (None, None) if best is None else (best[1], best[2])


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
