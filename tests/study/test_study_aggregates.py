"""A study's numbers against ``selcal evaluate`` run on each file: every run's result the same
bit for bit, and every aggregate equal to an independent computation from the per-run JSON;
the CSV is the tidy table of ``to_polars()``; a recipe whose runs lost the order of a fifth of
their logits is judged worse."""

from __future__ import annotations

import pickle
import statistics
from fractions import Fraction

import polars as pl
import pytest
from helpers import write_study

from selcal.study import study

PATTERN = "{dataset}/{recipe}_seed{seed}.parquet"


@pytest.fixture
def two_data_sets(tmp_path):
    paths = write_study(tmp_path, datasets=("c10", "c100"), recipes=("ce", "ls"), seeds=(0, 1, 2), n=300,
                                n_val=150, quality={"ls": 1.1})
    return tmp_path, paths


def _run_cli(cli, folder, *args):
    result = cli("study", *args, "--pattern", PATTERN, catch_exceptions=False)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


@pytest.mark.slow
def test_every_run_is_evaluated_as_evaluate_evaluates_it(cli, two_data_sets, h, tmp_path):
    folder, paths = two_data_sets
    _run_cli(cli, folder, *paths, "--json", tmp_path / "study.json", "-q")
    study_json = h.strict_json((tmp_path / "study.json").read_text())
    assert [r["path"] for r in study_json["runs"]] == sorted(str(p) for p in paths)  # (sorted: c10 < c100, ce < ls)
    for run in study_json["runs"]:
        alone = cli.json(run["path"])
        assert len(alone["models"]) == 1
        assert run["result"] == alone["models"][0]  # every number, bit for bit (and the name, path, warnings)
    assert study_json["options"] == alone["options"]


def _independent_aggregates(cli, paths) -> dict:
    """(dataset, recipe, score, metric) -> (runs, mean, std) from one `selcal evaluate --json` per file,
    for every number of the JSON that the metric catalog names (not a fit's diagnostics)."""
    from selcal.metrics import catalog

    per_group: dict = {}
    for path in paths:
        model = cli.json(path)["models"][0]
        group = (path.parent.name, path.stem.split("_seed")[0])
        numbers = {(None, k): model[k] for k in ("accuracy", "top5_accuracy", "error", "nll", "brier", "cece")
                   if model.get(k) is not None}
        for score, metrics in model["scores"].items():
            for key, value in metrics.items():
                if catalog.get(key) is None or isinstance(value, (bool, str, dict)) or value is None:
                    continue
                numbers[(score, key)] = value
        for key, value in numbers.items():
            per_group.setdefault((*group, *key), []).append(value)
    out = {}
    for key, values in per_group.items():
        out[key] = (len(values), float(sum(Fraction(v) for v in values) / len(values)), statistics.stdev(values))
    return out


@pytest.mark.slow
def test_aggregates_equal_an_independent_computation_from_each_runs_json(cli, two_data_sets, tmp_path):
    folder, paths = two_data_sets
    _run_cli(cli, folder, *paths, "--csv", tmp_path / "study.csv", "-q")
    frame = pl.read_csv(tmp_path / "study.csv")
    expected = _independent_aggregates(cli, paths)
    got = {(r["dataset"], r["recipe"], r["score"], r["metric"]): (r["runs"], r["mean"], r["std"])
           for r in frame.iter_rows(named=True)}
    assert set(expected) == set(got)
    for key, (runs, mean, std) in expected.items():
        assert got[key][0] == runs == 3
        assert got[key][1] == mean, key  # exact: the float nearest the true mean
        assert got[key][2] == pytest.approx(std, rel=1e-12, abs=1e-18), key


@pytest.mark.slow
def test_the_csv_is_the_tidy_table(cli, two_data_sets, tmp_path):
    folder, paths = two_data_sets
    _run_cli(cli, folder, *paths, "--csv", tmp_path / "s.csv", "--baseline", "ce", "--bootstrap", "50", "-q",
             "--scores", "msp,max_logit")
    result = study([str(p) for p in paths], pattern=PATTERN, baseline="ce", bootstrap=50, scores="msp,max_logit")
    frame = result.to_polars()
    assert list(frame.columns) == ["dataset", "recipe", "score", "metric", "runs", "mean", "std", "low", "high",
                                   "diff", "diff_low", "diff_high", "p", "verdict"]
    read = pl.read_csv(tmp_path / "s.csv", schema=frame.schema)
    assert read.equals(frame)
    judged = frame.filter(pl.col("verdict").is_not_null())
    assert sorted(set(zip(judged["score"].fill_null(""), judged["metric"]))) == [("", "accuracy"), ("msp", "aurc"),
                                                                                   ("msp", "ece")]
    assert judged["recipe"].unique().to_list() == ["ls"] and judged.height == 6
    with_interval = frame.filter(pl.col("low").is_not_null())
    assert with_interval.height == 12  # the three study metrics, per recipe and data set
    assert (with_interval["low"] <= with_interval["mean"]).all() and (with_interval["mean"] <= with_interval["high"]).all()


def test_a_recipe_with_a_fifth_of_its_logits_shuffled_is_worse(tmp_path):
    paths = write_study(tmp_path, recipes=("base", "shuffled"), seeds=(0, 1, 2), n=1000, n_val=300,
                                shuffle={"shuffled": 0.2})
    result = study([str(p) for p in paths], pattern=PATTERN, baseline="base", bootstrap=300, scores="msp,max_logit",
                   metrics=["accuracy", "msp.aurc", "max_logit.aurc"])
    verdicts = {(r["score"], r["metric"]): r["verdict"] for r in result.rows if r["recipe"] == "shuffled"
                and r["verdict"] is not None}
    assert verdicts == {(None, "accuracy"): "worse", ("msp", "aurc"): "worse", ("max_logit", "aurc"): "worse"}


def test_one_generator_gives_the_same_verdicts(tmp_path):
    paths = write_study(tmp_path, recipes=("a", "b"), seeds=(0, 1, 2), n=500, n_val=200)
    result = study([str(p) for p in paths], pattern=PATTERN, baseline="a", bootstrap=200, scores="msp,max_logit")
    assert [r["verdict"] for r in result.rows if r["verdict"] is not None] == ["same"] * 3


class _PicklingEngine:
    """An engine that is not the local one (so run_jobs takes the streamed path of a remote worker)
    and sends every job and result through pickle, as Ray does."""

    name = "ray"

    def run(self, fn, items, *, progress=None, **resources):
        return [pickle.loads(pickle.dumps(fn(pickle.loads(pickle.dumps(item))))) for item in items]


@pytest.mark.slow
def test_a_remote_engine_gives_the_same_study(monkeypatch, two_data_sets):
    from selcal.pipeline import engines

    _, paths = two_data_sets
    args = dict(pattern=PATTERN, baseline="ce", bootstrap=40, scores="msp,max_logit,temp")
    local = study([str(p) for p in paths], **args)
    monkeypatch.setitem(engines.ENGINES, "ray", _PicklingEngine)
    remote = study([str(p) for p in paths], engine="ray", **args)
    assert remote.to_json() == local.to_json()
