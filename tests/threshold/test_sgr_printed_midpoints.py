"""SGR is Algorithm 1 of Geifman & El-Yaniv 2017 as printed (issue 33, "Threshold edges"): the
midpoints z = ⌈(z_min + z_max)/2⌉ over the n calibration rows from z_min = 1, z_max = n, each of the
⌈log2 n⌉ tests at δ/⌈log2 n⌉ (a count fixed by n before the scores are seen), ties accepted together.

Each test here failed on the search it replaces (midpoints over the G tie groups from z_min = 0,
⌈log2 G⌉ tests at δ/⌈log2 G⌉)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from oracles import ref_threshold as ref
import selcal
from selcal.threshold import guarantee as th

SAMPLES = Path(__file__).resolve().parents[2] / "sample_logits"


def _scipy_bound(errors, n, delta):
    return 1.0 if errors >= n else float(stats.beta.isf(delta, errors + 1, n - errors))


def _steps(cert):
    return [(test.accepted, test.errors, test.passed) for test in cert.tests]


def _printed_steps(steps):
    return [(accepted, errors, passed) for _, _, accepted, errors, _, passed in steps]


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 300), st.floats(0.02, 0.6), st.floats(0.001, 0.5), st.integers(0, 2 ** 32 - 1))
def test_every_step_is_the_printed_step_on_tie_free_scores(n, risk, delta, seed):
    rng = np.random.default_rng(seed)
    score = rng.permutation(n).astype(float)  # tie-free
    correct = rng.random(n) >= 0.5 * (1 - score / n)  # errors among the low scores
    cert = th.sgr(score, correct, risk=risk, delta=delta)
    printed = ref.algorithm_one(score.tolist(), correct.tolist(), risk, delta, _scipy_bound)
    assert len(cert.tests) == len(printed) == max(1, math.ceil(math.log2(n)))
    assert _steps(cert) == _printed_steps(printed)
    threshold, bound = ref.sgr(score.tolist(), correct.tolist(), risk, delta) if n <= 40 else (None, None)
    if n <= 40:  # the exact bisection of the reference is slow beyond a few dozen rows
        assert cert.threshold == threshold and (bound is None or cert.bound == pytest.approx(bound, rel=1e-8))


@pytest.mark.slow
def test_small_tie_free_sets_against_the_exact_transcription():
    rng = np.random.default_rng(5)
    for n in (2, 3, 4, 5, 7, 8, 9, 16, 17, 31):
        score = rng.permutation(n).astype(float)
        correct = rng.random(n) >= 0.2
        for risk in (0.3, 0.5, 0.8):
            cert = th.sgr(score, correct, risk=risk, delta=0.2)
            printed = ref.algorithm_one(score.tolist(), correct.tolist(), risk, 0.2)
            assert _steps(cert) == _printed_steps(printed)
            for test, step in zip(cert.tests, printed):
                assert test.statistic == pytest.approx(step[4], rel=1e-9, abs=1e-15)


def test_the_lowest_row_is_never_tested_on_tie_free_scores():
    # z = ⌈(1 + 2)/2⌉ = 2 at best: every row right and a loose target accept all but the lowest row
    cert = th.sgr(np.arange(64.0), np.ones(64, bool), risk=0.9, delta=0.5)
    assert [test.accepted for test in cert.tests] == [32, 48, 56, 60, 62, 63]
    assert cert.accepted == 63 and cert.threshold == 1.0


def test_real_calibration_rows_reach_the_printed_answer():
    """The 10 216 tie-free validation rows of the long-tailed ResNet-110 sample at r = 10%, δ = 5%:
    the printed midpoints accept 7 726 rows; the search over tie groups from z_min = 0 stopped at 7 721."""
    result = selcal.threshold(str(SAMPLES / "sctl_cifar10lt_resnet110.parquet"), risk=0.1, delta=0.05)
    cert = result.entries[0].certificate
    assert cert.n == 10216 and cert.curve.accepted.size == 10216  # tie-free
    assert cert.accepted == 7726 and len(cert.tests) == 14
    # the transcription on the same rows (their scores as ranked, and whether each is right)
    curve = cert.curve
    score = np.repeat(curve.thresholds, np.diff(np.concatenate([[0], curve.accepted])))
    wrong = np.diff(np.concatenate([[0], curve.errors])).astype(bool)
    printed = ref.algorithm_one(score.tolist(), (~wrong).tolist(), 0.1, 0.05, _scipy_bound)
    assert _steps(cert) == _printed_steps(printed)
    assert [step for step in printed if step[5]][-1][2] == 7726


def test_a_tie_group_is_tested_at_delta_over_log2_of_the_rows_not_of_the_groups():
    # 4 100 rows in 3 tie groups, 10 errors among the 4 000 most confident: ⌈log2 4100⌉ = 13 tests at
    # δ/13 each. The count of groups (⌈log2 3⌉ = 2 tests at δ/2) depends on the scores: it certified
    # every row at r = 0.45% with B*(10, 4100, 0.05) = 0.413%, a binomial tail P(Binom(4100, 0.0045)
    # <= 10) = 0.024 far above δ/13 = 0.0077; at δ/13 the bound is 0.502% and nothing passes.
    score = np.repeat([3.0, 2.0, 1.0], [4000, 60, 40])
    correct = np.ones(4100, bool)
    correct[:10] = False
    cert = th.sgr(score, correct, risk=0.0045, delta=0.1)
    assert len(cert.tests) == 13
    for test in cert.tests:
        assert test.statistic == th.binomial_upper_bound(test.errors, test.accepted, 0.1 / 13)
    assert cert.abstain_all
    assert th.binomial_upper_bound(10, 4100, 0.05) < 0.0045 < th.binomial_upper_bound(10, 4100, 0.1 / 13)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=400), st.floats(0.02, 0.6),
       st.floats(0.001, 0.5))
def test_a_certified_threshold_has_a_p_value_below_delta_over_log2_n(data, risk, delta):
    score, correct = [s for s, _ in data], [c for _, c in data]
    cert = th.sgr(score, correct, risk=risk, delta=delta)
    assert len(cert.tests) == max(1, math.ceil(math.log2(len(data))))
    if not cert.abstain_all:
        assert th.binomial_p_value(cert.errors, cert.accepted, risk) < delta / len(cert.tests)
    for test in cert.tests:  # ties accepted together: a test accepts every row tied with its threshold
        theta = cert.curve.thresholds[test.index]
        assert test.accepted == sum(s >= theta for s in score)
