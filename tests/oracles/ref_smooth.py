"""Independent smooth ECE for tests: the reflected kernel summed image by image, |g| integrated exactly.

Written differently from selcal.metrics.smooth (no grid, no FFT): g(t) = (1/N) Σ_i r_i Σ_m [φ(t - q_i - 2m) + φ(t + q_i - 2m)]
is evaluated on a dense grid only to find its sign changes, each root is polished by Brent's method, and
∫|g| is the sum over the intervals between roots of |∫ g|, each integral in closed form with the normal CDF.
σ* by plain bisection.
"""

import numpy as np
from scipy import optimize
from scipy.stats import norm

IMAGES = range(-3, 4)


def _images(q):
    return [(q + 2 * m) for m in IMAGES] + [(-q + 2 * m) for m in IMAGES]


def g(t, q, r, sigma):
    t = np.atleast_1d(t)[:, None]
    total = sum(norm.pdf(t, loc=centre[None, :], scale=sigma) @ r for centre in _images(q))
    return total / q.size


def integral(a, b, q, r, sigma):
    return sum(float(np.dot(norm.cdf(b, centre, sigma) - norm.cdf(a, centre, sigma), r))
               for centre in _images(q)) / q.size


def smece_sigma(q, c, sigma, search_points=2001):
    q = np.asarray(q, float)
    r = np.asarray(c, float) - q
    grid = np.linspace(0.0, 1.0, search_points)
    values = g(grid, q, r, sigma)
    cuts = [0.0]
    for j in np.flatnonzero(np.sign(values[:-1]) * np.sign(values[1:]) < 0):
        cuts.append(optimize.brentq(lambda t: g(t, q, r, sigma)[0], grid[j], grid[j + 1], xtol=1e-15))
    cuts.append(1.0)
    return sum(abs(integral(a, b, q, r, sigma)) for a, b in zip(cuts[:-1], cuts[1:]))


def smece(q, c):
    low, high = 1e-4, 1.0
    for _ in range(40):
        mid = 0.5 * (low + high)
        if smece_sigma(q, c, mid) > mid:
            low = mid
        else:
            high = mid
    sigma = 0.5 * (low + high)
    return smece_sigma(q, c, sigma), sigma
