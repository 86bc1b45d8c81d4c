"""The two-level bootstrap, vectorised, against a brute-force loop on a small study: the same
seed gives the same resamples, so the same intervals; the draw depends neither on the rows'
order in the files nor on which other data sets and recipes are in the study."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import write_run, write_study

import selcal
from selcal.bootstrap import RowData, canonical_order, draw_resamples, percentile_interval
from selcal.metrics import calibration, selective
from selcal.study import stats, study
from selcal.study.twolevel import restrict, row_seed, run_draws, run_seed

PATTERN = "{dataset}/{recipe}_seed{seed}.parquet"
SCORES = "msp,max_logit"
B = 60


@pytest.fixture
def small_study(tmp_path):
    paths = write_study(tmp_path, recipes=("a", "b"), seeds=(0, 1, 2), n=80, n_val=40,
                                quality={"b": 0.9})
    return tmp_path, paths


def _brute_force(paths, metrics, seed=0, confidence=0.95):
    """Each recipe's two-level resamples computed literally: each drawn run's metric by the plain
    functions on the drawn rows, then the mean over the drawn runs."""
    models = selcal.evaluate([str(p) for p in paths], scores=SCORES).models
    names = [p.stem.split("_seed")[0] for p in paths]
    wanted = {"model": {"accuracy"}, "max_logit": {"aurc"}, "msp": {"ece"}}
    datas = [restrict(RowData.from_model(m, selcal.Options(scores=tuple(SCORES.split(",")))), wanted) for m in models]
    order = canonical_order(*datas)
    draws = np.concatenate(list(draw_resamples(models[0].n_eval, B, row_seed(seed, "d1"))))

    def metric(model, rows, name):
        correct = np.asarray(model.rows.correct)[order][rows]
        if name == "accuracy":
            return correct.mean()
        if name == "max_logit.aurc":
            score = np.asarray(model.score_values["max_logit"])[order][rows]
            return selective.selective_metrics(selective.risk_coverage(score, correct))["aurc"]
        confidence_ = np.asarray(model.confidences["msp"])[order][rows]
        return calibration.expected_calibration_error(confidence_, correct, 15)

    out = {}
    for recipe in ("a", "b"):
        index = [i for i, name in enumerate(names) if name == recipe]
        runs_drawn = run_draws(len(index), B, run_seed(seed, "d1", recipe))
        for name in metrics:
            per_run = np.array([[metric(models[i], draws[b], name) for b in range(B)] for i in index])
            both = np.array([np.mean([per_run[j, b] for j in runs_drawn[b]]) for b in range(B)])
            points = [getattr(models[i], "accuracy") if name == "accuracy" else
                      models[i].scores[name.split(".")[0]][name.split(".")[1]] for i in index]
            summary = stats.summary(points)
            spread = stats.interval(summary.mean, [summary], stats.shared_row_variance([(per_run, 1.0)], confidence),
                                    confidence)
            out[(recipe, name)] = {"both": both, "rows": per_run, "summary": summary, "interval": spread,
                                   "plain": percentile_interval(both, confidence)}
    return out


@pytest.mark.slow
def test_the_two_level_bootstrap_equals_a_brute_force_loop(small_study):
    folder, paths = small_study
    metrics = ["accuracy", "max_logit.aurc", "msp.ece"]
    result = study([str(p) for p in paths], pattern=PATTERN, metrics=metrics, bootstrap=B, baseline="a",
                   scores=SCORES, curves=False)
    brute = _brute_force(paths, metrics)
    for row, detail in zip(result.rows, result.details):
        name = row["metric"] if row["score"] is None else f"{row['score']}.{row['metric']}"
        if name not in metrics:
            assert row["low"] is None and detail is None
            continue
        expected = brute[(row["recipe"], name)]
        assert row["mean"] == expected["summary"].mean
        assert (row["low"], row["high"]) == pytest.approx((expected["interval"].low, expected["interval"].high),
                                                          rel=1e-12, abs=1e-15)
        assert detail["plain_percentile"] == pytest.approx(expected["plain"], rel=1e-12, abs=1e-15)
        if row["recipe"] == "b":  # the difference: paired through the shared rows
            base = brute[("a", name)]
            shared = stats.shared_row_variance([(expected["rows"], 1.0), (base["rows"], -1.0)], 0.95)
            spread = stats.interval(row["mean"] - base["summary"].mean, [expected["summary"], base["summary"]],
                                    shared, 0.95)
            assert (row["diff_low"], row["diff_high"]) == pytest.approx((spread.low, spread.high), rel=1e-12)
            assert detail["difference"]["plain_percentile"] == pytest.approx(
                percentile_interval(expected["both"] - base["both"], 0.95), rel=1e-12, abs=1e-15)


@pytest.mark.slow
def test_intervals_do_not_depend_on_the_order_of_the_rows_or_of_other_data_sets(tmp_path):
    one = write_study(tmp_path / "one", datasets=("d1",), recipes=("a", "b"), n=80, n_val=40)
    shuffled = [write_run(tmp_path / "two" / p.relative_to(tmp_path / "one"), n=80, n_val=40, data_seed=0,
                                  run_seed=1000 * ("ab".index(p.stem[0])) + int(p.stem[-1]), order_seed=int(p.stem[-1]))
                for p in one]
    more = write_study(tmp_path / "two", datasets=("d0",), recipes=("c",), n=50, n_val=20)
    first = study([str(p) for p in one], pattern=PATTERN, bootstrap=40, scores="msp", curves=False)
    second = study([str(p) for p in shuffled + more], pattern=PATTERN, bootstrap=40, scores="msp", curves=False)
    ours = [(r["recipe"], r["score"], r["metric"], r["low"], r["high"]) for r in second.rows if r["dataset"] == "d1"]
    assert ours == [(r["recipe"], r["score"], r["metric"], r["low"], r["high"]) for r in first.rows]
    assert any(r["low"] is not None for r in first.rows)
