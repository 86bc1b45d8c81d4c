"""Sums over rows whose bits do not depend on BLAS's threads. Pure: no I/O.

A matrix product through BLAS (``counts @ values``) sums over rows in an order that depends on
how many threads BLAS runs (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``) and on its kernels:
the last bit of a reported number would then change with the machine's load settings. A
product of *integers* has no such freedom: every partial sum of integers below 2**53 is exact
in float64, so any order gives the same bits. :class:`CountWeightedSums` uses that: it splits
each column of values once into a few integer-valued slices (an error-free splitting, as in
Ozaki's scheme), lets BLAS multiply the integer multiplicities by the integer slices (exact,
at BLAS speed), and adds the slices' sums back in a fixed order.

Where floats must go through BLAS (the calibrators' fits and dirichlet's W log p), the work runs
under :func:`single_threaded_blas`: one BLAS thread sums in one order, whatever the machine's
``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` say.

References
----------
K. Ozaki, T. Ogita, S. Oishi, S. M. Rump, "Error-free transformations of matrix multiplication
by using fast routines of matrix multiplication and its applicability", Numerical Algorithms
59 (2012), 95-118.
J. Demmel, H. D. Nguyen, "Parallel reproducible summation", IEEE Transactions on Computers
64(7) (2015), 2060-2070.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

__all__ = ["CountWeightedSums", "KEPT_BITS", "single_threaded_blas"]


@contextmanager
def single_threaded_blas():
    """Run the block with BLAS on one thread (threadpoolctl), then restore the machine's setting.

    Enter it around whole passes (a fit, the reduction of every chunk), never inside the reduction's
    own worker threads: the limit is process-wide.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield

KEPT_BITS = 72  # bits of each column kept below its largest magnitude (float64 holds 53)


class CountWeightedSums:
    """``counts @ values`` (non-negative integer counts), the same bits whatever BLAS does.

    Each column x of ``values`` (N x M, float64), of largest magnitude below 2**e, is cut into
    slices x = q_1 2**(e-P) + q_2 2**(e-2P) + ... + rest, each q integer with |q| <= 2**P, where
    P = 53 - (bits of the largest row total of counts): every product count x q and every
    partial sum over rows is then an integer below 2**53, exact in float64 in any order. The
    slices' sums are scaled back and added in a fixed order. What is left out, |rest| below
    2**(e - KEPT_BITS) per row, is far below float64's precision of the sum, unless a column's
    largest value is 2**19 times its mean (more exact than BLAS's own rounding otherwise).
    A column holding inf (or NaN) is summed by BLAS as it is: its sum is inf or NaN in any order.

    Examples
    --------
    >>> values = np.array([[0.1, 1.0], [0.2, 2.0], [0.7, 3.0]])
    >>> sums = CountWeightedSums(values)
    >>> sums(np.array([[1, 1, 1], [0, 3, 0]]))
    array([[1. , 6. ],
           [0.6, 6. ]])
    """

    def __init__(self, values: np.ndarray):
        self.values = np.asarray(values, dtype=np.float64)
        if self.values.ndim != 2:
            raise ValueError("values must be a matrix (rows x columns)")
        self.finite = np.isfinite(self.values).all(axis=0)
        top = np.max(np.abs(self.values), axis=0, where=np.isfinite(self.values), initial=0.0)
        self.exponent = np.frexp(top)[1]  # |x| < 2**exponent in each column
        self._slices: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}

    def _split(self, bits: int) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """The integer slices side by side (N x columns, all-zero ones left out) and, per slice,
        the columns it holds and their units' exponents, for P = bits."""
        if bits not in self._slices:
            rest = np.where(self.finite, self.values, 0.0)
            slices, layout = [], []
            for s in range(1, math.ceil(KEPT_BITS / bits) + 1):
                shift = self.exponent - s * bits  # slice s counts units of 2**shift
                q = np.rint(np.ldexp(rest, -shift))
                rest = rest - np.ldexp(q, shift)  # exact: the error-free splitting
                held = np.flatnonzero(q.any(axis=0))  # an integer column needs one slice
                slices.append(q[:, held])
                layout.append((held, shift[held]))
            self._slices[bits] = (np.concatenate(slices, axis=1), layout)
        return self._slices[bits]

    def __call__(self, counts: np.ndarray, totals: np.ndarray | None = None) -> np.ndarray:
        """(B x M) sums of ``values`` weighted by ``counts`` (B x N, integers >= 0).

        ``totals`` (B,), the row sums of ``counts``, when the caller has them already.
        """
        totals = counts.sum(axis=1) if totals is None else totals
        largest = int(totals.max()) if totals.size else 0
        bits = 53 - max(largest, 1).bit_length()
        if bits < 8:
            raise ValueError(f"counts summing to {largest} are too many for exact float64 sums")
        weights = counts.astype(np.float64)
        stacked, layout = self._split(bits)
        exact = weights @ stacked  # integers below 2**53: the same bits in any order
        out = np.zeros((counts.shape[0], self.values.shape[1]))
        ends = np.cumsum([held.size for held, _ in layout])
        for (held, shift), end in reversed(list(zip(layout, ends))):  # smallest slice first: a fixed order
            out[:, held] += np.ldexp(exact[:, end - held.size:end], shift)  # exact unless subnormal
        if not self.finite.all():
            with np.errstate(invalid="ignore"):  # 0 x inf: NaN, as the product of the rows says
                out[:, ~self.finite] = weights @ self.values[:, ~self.finite]
        return out
