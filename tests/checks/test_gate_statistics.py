"""The statistics of the CI gate (selcal/checks/gate.py) against independent computations, and the
gate as `selcal check` and `selcal compare` apply it (issue 20: an honest CI gate)."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
from helpers import CE, FOCAL

from selcal.checks import gate
from selcal.metrics import catalog


def holm_adjusted(pvalues):
    """Holm-adjusted p-values, written the textbook way: p~_(j) = max_{i<=j} min(1, (m - i + 1) p_(i))."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p)
    adjusted = np.empty(m)
    running = 0.0
    for i, index in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[index]))
        adjusted[index] = running
    return adjusted


@pytest.mark.parametrize("seed", range(30))
def test_holm_rejects_exactly_the_adjusted_pvalues_below_alpha(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.1, size=rng.integers(1, 12)) ** rng.uniform(0.5, 2)
    for alpha in (0.01, 0.025, 0.05):
        assert gate.holm(p.tolist(), alpha).tolist() == (holm_adjusted(p) <= alpha).tolist()


def test_holm_leaves_untested_metrics_out_of_the_family():
    assert gate.holm([0.02, None], 0.025).tolist() == [True, False]  # m = 1, not 2
    assert gate.holm([None, None], 0.05).tolist() == [False, False]


def test_holm_controls_the_familywise_error_of_true_nulls():
    """Three true null hypotheses with uniform p-values: P(any rejection) <= alpha."""
    rng = np.random.default_rng(0)
    trials = 20000
    rejected = sum(gate.holm(rng.uniform(size=3).tolist(), 0.025).any() for _ in range(trials))
    assert rejected / trials <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / trials)


def test_paired_pvalue_counts_the_resamples_that_are_not_worse():
    rng = np.random.default_rng(3)
    worsening = rng.normal(0.001, 0.002, size=999)
    worsening[:7] = np.nan  # undefined resamples are left out
    defined = worsening[7:]
    for tolerance in (0.0, 0.001, 0.01):
        expected = (1 + sum(1 for w in defined if w <= tolerance)) / (1 + len(defined))
        assert gate.paired_pvalue(worsening, tolerance) == pytest.approx(expected, rel=1e-15)
    assert gate.paired_pvalue(np.full(5, np.nan)) is None


def test_paired_pvalue_agrees_with_the_percentile_interval():
    """One metric, t = 0: p < (1 - c)/2 exactly when the percentile interval at c lies above 0."""
    rng = np.random.default_rng(4)
    for shift in np.linspace(-0.004, 0.008, 25):
        values = rng.normal(shift, 0.002, size=4000)
        low = np.quantile(values, 0.025)
        p = gate.paired_pvalue(values)
        if abs(np.mean(values <= 0) - 0.025) > 0.003:  # away from the boundary (the +1 terms, quantile method)
            assert (p < gate.alpha_of(0.95)) == (low > 0), shift


def test_interval_pvalue_is_the_normal_tail_of_the_difference():
    normal = statistics.NormalDist()
    z = normal.inv_cdf(0.95)  # 90% intervals
    worse, tol = 0.004, 0.001
    ci_c, ci_b = [0.020, 0.030], [0.015, 0.023]
    se = ((0.010 / (2 * z)) ** 2 + (0.008 / (2 * z)) ** 2) ** 0.5
    assert gate.interval_pvalue(worse, ci_c, ci_b, 0.90, tol) == pytest.approx(1 - normal.cdf((worse - tol) / se))
    assert gate.interval_pvalue(0.01, [1, 1], [1, 1], 0.95) == 0.0  # no noise at all: any worsening counts
    assert gate.interval_pvalue(-0.01, [1, 1], [1, 1], 0.95) == 1.0


# ------------------------------------------------------------------ the gate in check/compare
@pytest.mark.slow
def test_check_judges_the_primary_metrics_by_default_and_every_one_with_all(cli, tmp_path):
    base = cli.json_file(tmp_path / "ce.json", CE)
    focal = cli.json_file(tmp_path / "focal.json", FOCAL)
    report = json.loads(cli("check", focal, "--baseline", base, "--json", "-").stdout)
    assert [row["metric"] for row in report["rows"]] == ["accuracy", "msp.aurc", "msp.ece"]
    every = json.loads(cli("check", focal, "--baseline", base, "--json", "-", "--all").stdout)
    judged = [row["metric"] for row in every["rows"]]
    assert len(judged) == len(set(judged))
    # every key of the catalog with a direction, of every score that has it (read from the catalog)
    scores = json.loads(focal.read_text())["models"][0]["scores"]
    assert {f"{name}.{key}" for name, metrics in scores.items() for key in metrics
            if catalog.get(key) is not None and catalog.better(key) is not None and metrics[key] is not None} \
        <= set(judged)
    assert {"msp.smece", "temp.smece"} <= set(judged)
    assert not any(metric.endswith("smece_sigma") for metric in judged)  # reported, never judged
    chosen = json.loads(cli("check", focal, "--baseline", base, "--json", "-", "--metric", "temp.ece",
                            "--metric", "nll").stdout)
    assert [row["metric"] for row in chosen["rows"]] == ["nll", "temp.ece", "temp.nll"]  # nll: every score's too


@pytest.mark.slow
def test_the_focal_model_passes_the_default_gate_that_failed_it(cli, tmp_path):
    """Issue 20: it failed on max_logit risk@cov 80% (1.23% -> 1.89%), a real worsening of a
    score that is not the gate's: the default gate judges accuracy, msp AURC and msp ECE."""
    base = cli.json_file(tmp_path / "ce.json", CE, "--bootstrap", "300")
    focal = cli.json_file(tmp_path / "focal.json", FOCAL, "--bootstrap", "300")
    result = cli("check", focal, "--baseline", base)
    assert result.exit_code == 0, result.stdout
    every = cli("check", focal, "--baseline", base, "--all", "--json", "-")
    rows = {row["metric"]: row for row in json.loads(every.stdout)["rows"]}
    assert sum(row["p_value"] is not None for row in rows.values()) >= 50  # Holm over all of them
    assert not any(row["failed"] for name, row in rows.items() if not name.startswith("max_logit"))
    compared = cli("compare", CE, FOCAL, "--bootstrap", "300")
    assert compared.exit_code == 0, compared.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "compare"])
def test_every_default_line_fits_100_columns(cli, tmp_path, command):
    base = cli.json_file(tmp_path / "ce.json", CE, "--bootstrap", "100")
    focal = cli.json_file(tmp_path / "focal.json", FOCAL, "--bootstrap", "100")
    if command == "check":
        result = cli("check", focal, "--baseline", base, "--tolerance", "msp.aurc=0.001")
    else:
        result = cli("compare", CE, FOCAL, "--bootstrap", "100", "--tolerance", "msp.aurc=0.001")
    lines = (result.stdout + result.stderr).splitlines()
    assert lines and max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "msp AURC (%)" in result.stdout and "0.95" in result.stdout  # evaluate's name and unit (0.95%)
