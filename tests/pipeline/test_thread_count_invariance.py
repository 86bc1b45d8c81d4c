"""Every reported number is the same whatever the number of BLAS / OpenMP threads.

A matrix product sums over rows in an order that depends on BLAS's threads (OpenBLAS splits the
work differently with 1 and 2 threads), so a number summed through BLAS changes in its last bit
with ``OPENBLAS_NUM_THREADS``. These tests run golden commands in fresh interpreters (BLAS reads
the variables when it loads) and compare the bytes, and check the exact row sums of the bootstrap
(:mod:`selcal.metrics.exact_sums`) against ``math.fsum``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT

from selcal.metrics.exact_sums import CountWeightedSums

GOLDEN = ROOT / "tests" / "golden"
# the commands whose numbers go through a sum over rows: bootstraps (default, every score, the
# mbls adaptive ECE), a paired comparison, every score on K = 10 and K = 100, a segmentation folder,
# the calibrators (their fits sum floats through BLAS: run with one BLAS thread)
CASES = ["boot", "boot_all", "boot_mbls", "compare_all", "all_ce", "all_netcal", "seg", "calib_ce"]


def _golden_with_threads(out: Path, threads: int) -> dict[str, bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, str(GOLDEN / "make_golden.py"), str(out), *CASES], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=600)
    return {p.name: p.read_bytes() for p in out.iterdir()}


@pytest.mark.slow
def test_golden_outputs_do_not_depend_on_the_blas_thread_count(tmp_path):
    one = _golden_with_threads(tmp_path / "one", 1)
    four = _golden_with_threads(tmp_path / "four", 4)  # more threads than cores: BLAS splits the work anyway
    assert sorted(one) == sorted(four) and len(one) >= len(CASES)
    differ = [name for name in sorted(one) if one[name] != four[name]]
    assert not differ, f"outputs that change with the BLAS threads: {differ}"
    expected = {name: (GOLDEN / "expected" / name).read_bytes() for name in one}
    assert [name for name in sorted(one) if one[name] != expected[name]] == []


def _exact(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The correctly rounded sums, written differently: math.fsum over the repeated values."""
    out = np.empty((counts.shape[0], values.shape[1]))
    for b in range(counts.shape[0]):
        for j in range(values.shape[1]):
            out[b, j] = math.fsum(v for c, v in zip(counts[b], values[:, j]) for _ in range(c))  # c v is rounded
    return out


def _columns(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.column_stack([
        rng.random(n) < 0.7,  # correct (0/1)
        rng.exponential(0.5, n),  # an NLL
        rng.random(n) * 2.0,  # a Brier score
        -rng.random(n) * 1e-9,  # tiny and negative
        rng.normal(0, 1e300, n) / 8,  # huge, both signs
        np.where(rng.random(n) < 0.5, 5e-324, 0.0),  # subnormal
        np.zeros(n),
        rng.normal(0.0, 1.0, n) * 10.0 ** rng.integers(-8, 8, n),  # wide dynamic range
    ])


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_count_weighted_sums_are_the_exact_sums_rounded(n):
    rng = np.random.default_rng(n)
    values = _columns(rng, n)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=6)
    got, want = CountWeightedSums(values)(counts), _exact(counts, values)
    # within an ulp of the correctly rounded sum (the last column: its largest value is far above
    # its mean, so rows far below the largest lose their last bits, as the class docstring says)
    ulp = np.spacing(np.abs(want))
    assert np.all(np.abs(got - want)[:, :-1] <= ulp[:, :-1])
    assert np.allclose(got[:, -1], want[:, -1], rtol=1e-12, atol=1e-20)


def test_count_weighted_sums_do_not_depend_on_the_order_of_the_rows():
    rng = np.random.default_rng(3)
    n = 3000  # large enough for BLAS to split the product over its threads
    values = _columns(rng, n)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=100)
    sums = CountWeightedSums(values)(counts)
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(n)
        again = CountWeightedSums(values[order])(counts[:, order])
        assert sums.tobytes() == again.tobytes()
    assert (counts @ values[:, 1]).tobytes() != (counts[:, order] @ values[order, 1]).tobytes()  # BLAS's sums do


def test_count_weighted_sums_of_other_totals_and_of_infinities():
    values = np.array([[1.5, np.inf], [2.25, 1.0], [0.125, 2.0]])
    sums = CountWeightedSums(values)
    counts = np.array([[0, 0, 0], [2**40, 0, 1], [1, 1, 1]])  # a cluster resample holds any number of rows
    got = sums(counts)
    assert got[:, 0].tolist() == [0.0, 1.5 * 2**40 + 0.125, 3.875]
    assert np.isposinf(got[1:, 1]).all()
