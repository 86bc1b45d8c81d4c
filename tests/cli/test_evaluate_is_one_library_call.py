"""``selcal evaluate`` parses its flags into the library's records, calls :func:`selcal.api.evaluate`
once and renders what it returns. What the command did itself before lives in the library: every
failed model is named (not only the first), progress reaches a hook, and the sort column, the engine
and the figure options are refused before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_data

import selcal
import selcal.api
from selcal.errors import ModelsFailed, OptionError, SelcalError
from selcal.options import FigureSettings, ReadSettings, RunSettings


@pytest.fixture
def two_models(dumps):
    paths = []
    for seed in (1, 2):
        logits, labels = make_data(n=300, seed=seed)
        paths.append(dumps.npz(f"m{seed}.npz", logits, labels))
    return paths


def test_the_command_calls_the_library_once_with_its_records(cli, two_models, monkeypatch, tmp_path):
    calls = []
    real = selcal.api.evaluate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(selcal.api, "evaluate", spy)
    out = tmp_path / "r.json"
    result = cli("evaluate", *two_models, "--scores", "msp,max_logit", "--label-col", "labels", "--engine", "local",
                 "--sort-by", "aurc_msp", "--plot-format", "svg", "--json", out, "-q")
    assert result.exit_code == 0, result.stderr
    assert len(calls) == 1
    call = calls[0]
    assert call["options"].scores == ("msp", "max_logit")
    assert call["read"] == ReadSettings(label_col="labels")
    assert call["run"] == RunSettings(engine="local", sort_by="aurc_msp")
    assert isinstance(call["figures"], FigureSettings) and call["figures"].plot_format == "svg"
    assert json.loads(out.read_text()) == json.loads(real(two_models, scores="msp,max_logit").to_json())


def test_the_command_body_holds_no_step_of_the_evaluation():
    """The library's sequence (jobs, engines, sweep, bootstrap) is not re-run by the command, and no
    stand-in object pre-validates the sort column."""
    source = (Path(selcal.__file__).parent / "cli" / "evaluate.py").read_text()
    for step in ("model_jobs", "run_jobs", "sweep_values", "add_sweep", "with_intervals", "check_arguments",
                 'type("Empty"'):
        assert step not in source, step


def test_every_failed_model_is_named_and_nothing_is_written(cli, two_models, dumps, tmp_path):
    broken = dumps.path("broken.npz")
    broken.write_bytes(b"not a zip file")
    out = tmp_path / "r.json"
    result = cli("evaluate", two_models[0], broken, tmp_path / "missing.parquet", "--json", out)
    assert result.exit_code == 2 and not out.exists()
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("selcal: error: ") for line in lines)
    assert "broken.npz" in lines[0] and "missing.parquet" in lines[1]


def test_the_library_raises_every_models_failure_at_once(two_models, tmp_path):
    with pytest.raises(ModelsFailed) as failed:
        selcal.evaluate([tmp_path / "a.parquet", two_models[0], tmp_path / "b.npz"], scores="msp")
    assert len(failed.value.messages) == 2
    assert "a.parquet" in failed.value.messages[0] and "b.npz" in failed.value.messages[1]
    assert str(failed.value) == "\n".join(failed.value.messages)
    assert isinstance(failed.value, SelcalError)


def _no_work(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the work started before the settings were checked")

    monkeypatch.setattr(selcal.api, "run_jobs", refuse)
    monkeypatch.setattr(selcal.api, "model_jobs", refuse)


@pytest.mark.parametrize("settings, message", [
    ({"sort_by": "no_such_column"}, "--sort-by 'no_such_column' is not a column"),
    ({"engine": "spark"}, "engine must be local or ray; got 'spark'"),
    ({"bootstrap": 1}, "bootstrap takes the number of resamples, at least 2"),
    ({"sweep": "accuracy"}, "--sweep 'accuracy' is the name of a leaderboard column"),
])
def test_the_library_refuses_a_bad_setting_before_any_work(monkeypatch, two_models, settings, message):
    _no_work(monkeypatch)
    with pytest.raises(SelcalError, match=message):
        selcal.evaluate(two_models, **settings)


@pytest.mark.parametrize("figures, message", [
    ({"plot_format": "bmp"}, "plot_format must be png, svg or pdf; got 'bmp'"),
    ({"at_coverage": 0.0}, r"at_coverage must be a fraction in \(0, 1\]"),
    ({"ls_alpha": "0.1,1.5"}, r"ls_alpha must be in \[0, 1\)"),
    ({"figures": "rc,nope"}, "figures: no figure kind 'nope'"),
    ({"rank_maps": -1}, "rank_maps takes a number of images, 0 or more; got -1"),
])
def test_the_figure_options_are_checked_by_the_library(figures, message):
    with pytest.raises(OptionError, match=message):
        FigureSettings(**figures)


def test_one_ls_alpha_per_test_file_is_checked_before_any_work(monkeypatch, two_models):
    _no_work(monkeypatch)
    with pytest.raises(OptionError, match=r"ls_alpha takes one value or one per TEST file \(2\); got 3"):
        selcal.evaluate(two_models, figures=FigureSettings(plots="figures", ls_alpha="0.1,0.2,0.3"))


def test_the_command_names_its_flags_in_the_librarys_errors(cli, two_models):
    for args, line in ((["--engine", "spark"], "selcal: error: --engine must be local or ray; got 'spark'"),
                       (["--plot-format", "bmp"], "selcal: error: --plot-format must be png, svg or pdf; got 'bmp'"),
                       (["--rank-maps", "-1"], "selcal: error: --rank-maps takes a number of images, 0 or more; got -1")):
        result = cli("evaluate", *two_models, *args)
        assert result.exit_code == 2 and result.stderr.strip() == line, result.stderr


def test_progress_reaches_the_hook_part_by_part(two_models):
    seen = []
    selcal.evaluate(two_models[:1], scores="msp", bootstrap=5, progress=lambda what, done, total: seen.append(what))
    assert seen[0] == "models" and "rows" in seen and seen[-1] == "resamples"
    assert seen.index("resamples") > max(i for i, what in enumerate(seen) if what in ("rows", "models"))


def test_a_progress_function_of_done_and_total_still_gets_the_rows(two_models):
    rows = []
    selcal.evaluate(two_models[:1], scores="msp", progress=lambda done, total: rows.append((done, total)))
    assert rows and rows[-1][0] == rows[-1][1]


def test_the_python_api_takes_every_setting_by_keyword(two_models):
    result = selcal.evaluate(two_models, scores="msp", sweep=None, engine="local", label_col="labels",
                             memory_budget=1 << 20, stream=True, sort_by="aurc_msp")
    assert [m.name for m in result.models] == ["m1", "m2"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        selcal.evaluate(two_models, colour="red")
