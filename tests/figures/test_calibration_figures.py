"""The calibration figures show what the conventions define (CONVENTIONS.md, "Calibration beyond bins").

* The smoothed reliability curve (``smooth``): its data equal the kernel-weighted accuracy and the
  kernel density written out as direct sums over the rows, with every mirror image of the reflected
  Gaussian listed explicitly (no grid, no FFT), at the score's σ*; the curve drawn on the axes is
  that data; the area between curve and diagonal, weighted by the density, is the smooth ECE.
* The reliability diagram's error bars: per bin, the 95% Clopper-Pearson interval of the bin's
  accuracy, equal to scipy's ``binomtest(k, n).proportion_ci(method="exact")`` and to the closed
  forms of k = 0 and k = n; none for an empty bin.
* The figure data functions are pure: no matplotlib is imported to compute them.
* The new kind is planned for every probability score, selectable with ``--figures smooth``, and
  in the HTML report.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

import selcal
from selcal import figures as plots
from selcal.figures.base import mpl, style
from selcal.metrics.smooth import smooth_ece
from selcal.report import html as html_report


# ------------------------------------------------------------------ references
def reflected_kernel(t: float, x: np.ndarray, sigma: float) -> np.ndarray:
    """K_σ(t, x) = Σ_m [φ_σ(t - x - 2m) + φ_σ(t + x - 2m)], the images m = -3..3 listed one by one."""
    total = np.zeros_like(x)
    for m in range(-3, 4):
        for image in (x + 2 * m, -x + 2 * m):  # x and its mirror -x, shifted by the period 2
            total += np.exp(-0.5 * ((t - image) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    return total


def direct_curve(q, c, sigma, t_points):
    """(t + Σ_i K(t, q_i)(c_i - q_i) / Σ_i K(t, q_i), (1/N) Σ_i K(t, q_i)) at each t, row sums in Python
    (accuracy NaN where every weight underflows)."""
    accuracy, density = [], []
    for t in t_points:
        weights = reflected_kernel(float(t), q, sigma)
        total = math.fsum(weights)
        accuracy.append(float(t) + math.fsum(weights * (c - q)) / total if total > 0 else math.nan)
        density.append(total / q.size)
    return np.array(accuracy), np.array(density)


def sample(n=300, seed=0):
    """Confidences with rows exactly at 0 and 1 (their mirror image is themselves) and crowding near 1."""
    rng = np.random.default_rng(seed)
    q = np.concatenate([rng.beta(5, 1.2, size=n - 6), [0.0, 0.0, 1.0, 1.0, 1.0, 0.5]])
    c = (rng.random(q.size) < q ** 1.5).astype(float)
    return q, c


# ================================================================ smoothed curve
@pytest.mark.parametrize("sigma", [0.02, 0.07, 0.3])
def test_smoothed_curve_equals_direct_sums_with_explicit_mirror_images(sigma):
    q, c = sample()
    data = plots.smooth_reliability_data(q, c, smece=0.0, sigma=sigma)
    assert data.bandwidth == sigma and data.t.size == plots.data.SMOOTH_POINTS
    every = np.arange(0, data.t.size, 16)  # 65 points, both ends included
    accuracy, density = direct_curve(q, c, sigma, data.t[every])
    np.testing.assert_allclose(data.density[every], density, rtol=2e-5, atol=1e-9)
    shown = data.shown[every]
    assert shown.sum() > 20
    np.testing.assert_allclose(data.accuracy[every][shown], accuracy[shown], atol=2e-5)
    # The curve and the density together are the smooth ECE's integrand: its area is smECE_σ.
    from selcal.metrics.smooth import smooth_ece_at

    assert data.smece_of_curve() == pytest.approx(smooth_ece_at(q, c, sigma), abs=2e-5)


def test_curve_defaults_to_the_fixed_point_and_is_not_drawn_where_rows_are_missing():
    q, c = sample(seed=1)
    data = plots.smooth_reliability_data(q, c)
    fixed = smooth_ece(q, c)
    assert (data.smece, data.sigma, data.bandwidth) == (fixed.value, fixed.sigma, fixed.sigma)
    assert data.smece_of_curve() == pytest.approx(fixed.value, abs=2e-5)  # at σ*, the area is σ* itself
    # shown: at least 10 rows' worth of kernel weight at its peak, checked by the direct density
    _, density = direct_curve(q, c, fixed.sigma, data.t)
    weight = q.size * density * fixed.sigma * math.sqrt(2 * math.pi)
    clear = np.abs(weight - 10) > 1e-3
    np.testing.assert_array_equal(data.shown[clear], (weight >= 10)[clear])
    # ticks: a seeded choice of rows, the same each time
    again = plots.smooth_reliability_data(q, c)
    np.testing.assert_array_equal(data.ticks, again.ticks)
    assert data.ticks.size == 100 and set(data.ticks) <= set(q)


def test_a_tiny_sigma_is_drawn_at_the_mesh_resolution():
    q, c = sample(seed=2)
    data = plots.smooth_reliability_data(q, c, smece=1e-5, sigma=1e-5)
    assert data.sigma == 1e-5 and data.bandwidth == 2.0 ** -10
    every = np.arange(0, data.t.size, 64)
    _, density = direct_curve(q, c, 2.0 ** -10, data.t[every])
    np.testing.assert_allclose(data.density[every], density, rtol=1e-4, atol=1e-9)


def fake_model(q, c, name="fake model", scores=None):
    """What the figures read of a result: probability scores' confidences, own correctness, metrics."""
    from types import SimpleNamespace

    q = np.asarray(q, float)
    scores = scores or {"msp": {"ece": 0.1}}
    return SimpleNamespace(name=name, n_eval=q.size, scores=scores, confidences={s: q for s in scores},
                           score_correct={}, rows=SimpleNamespace(correct=np.asarray(c, bool)))


def test_figure_draws_the_curve_at_the_reported_sigma():
    q, c = sample(seed=3)
    model = fake_model(q, c, scores={"msp": {"ece": 0.1, "smece": 0.0123, "smece_sigma": 0.05}})
    matplotlib, _, _ = mpl()
    with matplotlib.rc_context(style()):
        figure = plots.figure_smooth_reliability(model)
    ax = figure.axes[0]
    assert "smooth ECE 1.23%" in ax.get_title() and "σ* = 0.05" in ax.get_title()
    data = plots.smooth_reliability_data(q, c, smece=0.0123, sigma=0.05)
    from matplotlib.collections import LineCollection

    curve = [col for col in ax.collections if isinstance(col, LineCollection) and len(col.get_segments()) > 500][0]
    segments = np.array(curve.get_segments())
    keep = data.shown[:-1] & data.shown[1:]
    np.testing.assert_array_equal(segments[:, 0, 1], data.accuracy[:-1][keep])
    np.testing.assert_array_equal(segments[:, 0, 0], data.t[:-1][keep])
    widths = np.asarray(curve.get_linewidths())
    assert widths.min() < widths.max()  # thicker where more rows


def test_a_score_judged_by_its_own_predictions_brings_its_own_correctness():
    """A calibrator's ECE counts its own top label: both calibration figures use that correctness."""
    q, c = sample(seed=4)
    own = ~c.astype(bool)
    model = fake_model(q, c, scores={"msp": {"ece": 0.1}, "mine": {"ece": 0.1}})
    model.score_correct = {"mine": own}
    panels = {name: correct for name, _, correct in plots.reliability.probability_scores(model)}
    np.testing.assert_array_equal(panels["mine"], own)
    np.testing.assert_array_equal(panels["msp"], c.astype(bool))


# ============================================================ Clopper-Pearson
@pytest.mark.slow
def test_clopper_pearson_equals_scipy_binomtest():
    ks, ns = [], []
    for n in range(1, 41):
        for k in range(n + 1):
            ks.append(k), ns.append(n)
    rng = np.random.default_rng(0)
    for n in rng.integers(50, 100_000, size=30):
        for k in (0, 1, int(rng.integers(0, n + 1)), int(n) - 1, int(n)):
            ks.append(k), ns.append(int(n))
    lower, upper = plots.clopper_pearson(ks, ns)
    for k, n, lo, hi in zip(ks, ns, lower, upper):
        # binomtest finds each limit by a root search to about 2e-12 (brentq's xtol), absolute
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert lo == pytest.approx(ci.low, rel=1e-9, abs=1e-11), (k, n)
        assert hi == pytest.approx(ci.high, rel=1e-9, abs=1e-11), (k, n)


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_clopper_pearson_hand_worked_ends(n):
    # k = 0: P(Binom(n, p) = 0) = (1 - p)^n = 2.5% at the upper limit; k = n symmetric.
    lower, upper = plots.clopper_pearson([0, n], [n, n])
    assert lower[0] == 0.0 and upper[0] == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12)
    assert upper[1] == 1.0 and lower[1] == pytest.approx(0.025 ** (1 / n), rel=1e-12)


def test_clopper_pearson_one_success_in_many_trials_keeps_its_digits():
    # k = 1: the lower limit solves 1 - (1 - p)^n = 0.025, p = -expm1(log(0.975) / n) (about 3e-7 here)
    n = 85_069
    lower, _ = plots.clopper_pearson(1, n)
    assert float(lower) == pytest.approx(-math.expm1(math.log(0.975) / n), rel=1e-12)


def test_clopper_pearson_hand_worked_one_of_two():
    # k = 1, n = 2: the lower limit solves 1 - (1 - p)^2 = 0.025, the upper p^2 = 0.975... by symmetry.
    lower, upper = plots.clopper_pearson(1, 2)
    assert float(lower) == pytest.approx(1 - math.sqrt(0.975), rel=1e-12)
    assert float(upper) == pytest.approx(math.sqrt(0.975), rel=1e-12)


def test_reliability_data_carries_each_bins_interval_and_none_for_empty_bins():
    q = np.array([0.05, 0.05, 0.05, 0.55, 0.55, 0.95, 0.95, 0.95, 0.95])
    c = np.array([0, 0, 0, 1, 0, 1, 1, 1, 1], bool)
    data = plots.reliability_data(q, c, n_bins=10)
    assert data.empty.tolist() == [False, True, True, True, True, False, True, True, True, False]
    assert np.isnan(data.lower[data.empty]).all() and np.isnan(data.upper[data.empty]).all()
    assert (data.lower[0], data.upper[0]) == (0.0, pytest.approx(1 - 0.025 ** (1 / 3)))
    assert (data.lower[9], data.upper[9]) == (pytest.approx(0.025 ** (1 / 4)), 1.0)
    ci = stats.binomtest(1, 2).proportion_ci(method="exact")
    assert (data.lower[5], data.upper[5]) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_reliability_figure_draws_the_intervals():
    q, c = sample(seed=5)
    model = fake_model(q, c)
    matplotlib, _, _ = mpl()
    with matplotlib.rc_context(style()):
        figure = plots.figure_reliability(model, 15)
    ax = figure.axes[0]
    data = plots.reliability_data(q, c, 15)
    bars = [cont for cont in ax.containers if "Clopper-Pearson" in str(cont.get_label())]
    assert len(bars) == 1
    segments = np.array(bars[0].lines[2][0].get_segments())  # one vertical segment per non-empty bin
    full = ~data.empty
    np.testing.assert_allclose(segments[:, 0, 0], (data.edges[:-1] + 0.5 / 15)[full])
    np.testing.assert_allclose(np.sort(segments[:, :, 1], axis=1), np.column_stack([data.lower, data.upper])[full])


# ====================================================================== purity
@pytest.mark.slow
def test_figure_data_functions_import_no_matplotlib():
    code = ("import sys, numpy as np; from selcal.figures import data; "
            "d = data.smooth_reliability_data(np.linspace(0, 1, 50), np.arange(50) % 2); "
            "r = data.reliability_data(np.linspace(0, 1, 50), np.arange(50) % 2); "
            "data.clopper_pearson([1], [3]); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_data_functions_leave_their_inputs_alone():
    q, c = sample(seed=6)
    q0, c0 = q.copy(), c.copy()
    plots.smooth_reliability_data(q, c)
    plots.reliability_data(q, c, 15)
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(c, c0)


# ============================================================= plan and report
def small_result():
    rng = np.random.default_rng(7)
    n, k = 1200, 6
    labels = rng.integers(0, k, size=n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += 2.0
    options = selcal.Options(scores=("msp", "max_logit", "temp"))
    model = selcal.evaluate_arrays(logits[300:], labels[300:], logits[:300], labels[:300], name="m<&>",
                                   options=options)
    return selcal.EvaluationResult(models=[model], options=options)


@pytest.mark.slow
def test_smooth_is_a_kind_of_its_own_and_in_the_report():
    result = small_result()
    assert plots.parse_kinds("smooth") == frozenset({"smooth"})
    jobs = plots.plan_figures(result, kinds=plots.parse_kinds("smooth"))
    assert [job.kind for job in jobs] == ["smooth"]
    every = [job.kind for job in plots.plan_figures(result)]
    assert every.index("smooth") == every.index("reliability") + 1  # drawn by default, after the diagram
    drawn = list(plots.render_figures(result, "png", kinds=plots.parse_kinds("smooth,reliability")))
    assert [f.kind for f in drawn] == ["reliability", "smooth"]
    page = html_report.render_report(result, drawn)
    assert "alt='smooth m&lt;&amp;&gt;'" in page and "Smoothed reliability" in page
    assert page.count("<figure class='wide' id='figure-") == 2


def test_calibrators_panels_give_their_reported_numbers():
    """Each calibrator's panels: its own correctness (its own top label) gives its reported ECE,
    and the smoothed panel is drawn at its reported σ*."""
    from selcal.scores import REGISTRY

    calibrators = [name for name in ("vector", "dirichlet", "isotonic") if name in REGISTRY]
    if not calibrators:
        pytest.skip("the calibrators are not registry scores yet")
    rng = np.random.default_rng(8)
    n, k = 3000, 4
    labels = rng.integers(0, k, size=n)
    logits = rng.normal(size=(n, k)) * 2.0
    logits[np.arange(n), labels] += 1.5
    logits[:, 0] += 1.0  # a class bias that vector scaling and Dirichlet calibration undo: other top labels
    options = selcal.Options(scores=("msp", *calibrators))
    model = selcal.evaluate_arrays(logits[1000:], labels[1000:], logits[:1000], labels[:1000], options=options)
    panels = {name: (q, c) for name, q, c in plots.reliability.probability_scores(model)}
    assert set(panels) == {"msp", *calibrators}
    assert any(not np.array_equal(panels[name][1], model.rows.correct) for name in calibrators)
    for name, (q, c) in panels.items():
        assert plots.reliability_data(q, c, 15).ece() == pytest.approx(model.scores[name]["ece"], abs=1e-12)
        if "smece_sigma" in model.scores[name]:
            data = plots.smooth_reliability_data(q, c, model.scores[name]["smece"], model.scores[name]["smece_sigma"])
            assert data.smece_of_curve() == pytest.approx(model.scores[name]["smece"], abs=1e-4)
