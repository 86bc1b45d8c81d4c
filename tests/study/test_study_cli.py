"""``selcal study`` on the command line: bad input is one line and exit 2 with nothing written;
the outputs (table, LaTeX, Markdown, HTML, figures) escape every name for their medium, and the
terminal table fits 100 columns in a pipe."""

from __future__ import annotations

import pytest
from helpers import write_run, write_study

PATTERN = "{dataset}/{recipe}_seed{seed}.parquet"


@pytest.fixture
def runs(tmp_path):
    return write_study(tmp_path / "runs", recipes=("ce", "ls"), seeds=(0, 1), n=200, n_val=80)


def _refused(cli, out_dir, *args) -> str:
    result = cli("study", *args, "--json", out_dir / "s.json", "--csv", out_dir / "s.csv", "--scores", "msp")
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.stderr
    assert list(out_dir.iterdir()) == []  # nothing half-written
    return lines[0]


def test_a_path_the_template_does_not_match(cli, runs, out_dir, tmp_path):
    other = write_run(tmp_path / "runs" / "d1" / "odd.parquet")
    line = _refused(cli, out_dir, *runs, other, "--pattern", PATTERN)
    assert "odd.parquet: does not match the template --pattern {dataset}/{recipe}_seed{seed}.parquet" in line


def test_two_runs_of_one_recipe_and_seed(cli, runs, out_dir, tmp_path):
    again = write_run(tmp_path / "runs" / "d1" / "ce_seed00.parquet")
    assert "is the same run as" in _refused(cli, out_dir, *runs, again, "--pattern", PATTERN)


def test_a_baseline_that_is_not_a_recipe(cli, runs, out_dir):
    line = _refused(cli, out_dir, *runs, "--pattern", PATTERN, "--baseline", "focal")
    assert "--baseline focal: is not a recipe of the study (recipes: ce, ls)" in line


def test_seeds_of_two_types(cli, runs, out_dir, tmp_path):
    named = write_run(tmp_path / "runs" / "d1" / "ls_seedX.parquet")
    assert "seed 'X' is text but" in _refused(cli, out_dir, *runs, named, "--pattern", PATTERN)


def test_runs_of_one_data_set_on_other_rows(cli, runs, out_dir, tmp_path):
    other = write_run(tmp_path / "runs" / "d1" / "ls_seed7.parquet", n=150)
    line = _refused(cli, out_dir, *runs, other, "--pattern", PATTERN)
    assert "data set 'd1': the models were not evaluated on the same rows" in line and "ls_seed7" in line
    assert "--allow-other-data" in line
    result = cli("study", *runs, other, "--pattern", PATTERN, "--scores", "msp", "--allow-other-data")
    assert result.exit_code == 0 and "note: --allow-other-data" in result.stdout


@pytest.mark.parametrize("args, message", [
    ((), "give the runs' recipes and seeds by --pattern TEMPLATE or --manifest FILE"),
    (("--pattern", PATTERN, "--manifest", "m.csv"), "(one of them)"),
    (("--pattern", "{recipe}_run{seed}.parquet"), "does not match the template"),
    (("--pattern", PATTERN, "--metric", "nope"), "--metric nope: 'nope' is not a metric with a direction"),
    (("--pattern", PATTERN, "--metric", "m:msp.aurc"), "a study names metrics without a model"),
    (("--pattern", PATTERN, "--metric", "temp.aurc"), "--metric temp.aurc"),
    (("--pattern", PATTERN, "--bootstrap", "1"), "--bootstrap takes the number of resamples"),
    (("--pattern", PATTERN, "--engine", "spark"), "--engine must be local or ray"),
])
def test_bad_options_are_one_line(cli, runs, out_dir, args, message):
    assert message in _refused(cli, out_dir, *runs, *args)


def test_a_missing_run_file(cli, runs, out_dir, tmp_path):
    line = _refused(cli, out_dir, *runs, tmp_path / "runs" / "d1" / "ce_seed9.parquet", "--pattern", PATTERN)
    assert "ce_seed9.parquet" in line


def test_a_manifest_with_dumps_beside_it(cli, runs, out_dir, tmp_path):
    (tmp_path / "m.csv").write_text("path,recipe,seed\n" + "".join(f"{p},x,{i}\n" for i, p in enumerate(runs)))
    assert "give no dumps beside it" in _refused(cli, out_dir, runs[0], "--manifest", tmp_path / "m.csv")


def test_a_manifest_study(cli, runs, tmp_path):
    rows = "".join(f"{p.relative_to(tmp_path)},{p.stem.split('_seed')[0]},{p.stem[-1]}\n" for p in runs)
    (tmp_path / "m.csv").write_text("path,recipe,seed\n" + rows)
    result = cli("study", "--manifest", tmp_path / "m.csv", "--scores", "msp", "--csv", "-")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("dataset,recipe,score,metric,runs,mean,std,low,high\n,ce,,accuracy,2,")


HOSTILE = "ls_0.1&#$%{x}~^\\"


@pytest.mark.slow
def test_names_are_escaped_in_every_medium(cli, tmp_path):
    for seed in (0, 1):
        write_run(tmp_path / "d_1" / f"{HOSTILE}_seed{seed}.parquet", run_seed=seed)
        write_run(tmp_path / "d_1" / f"<b>=ce_seed{seed}.parquet", run_seed=10 + seed)
    paths = sorted((tmp_path / "d_1").glob("*.parquet"))
    result = cli("study", *paths, "--pattern", PATTERN, "--scores", "msp", "--latex", tmp_path / "t.tex",
                 "--markdown", tmp_path / "t.md", "--csv", tmp_path / "t.csv", "--report", tmp_path / "t.html")
    assert result.exit_code == 0, result.stderr
    latex = (tmp_path / "t.tex").read_text()
    assert r"ls\_0.1\&\#\$\%\{x\}\textasciitilde{}\textasciicircum{}\textbackslash{}" in latex
    assert r"\multicolumn{3}{c}{d\_1}" in latex and r"\textbf{" in latex and r"$\pm$" in latex
    assert latex.startswith(r"\begin{tabular}{lrrr}" + "\n\\toprule") and latex.endswith("\\bottomrule\n\\end{tabular}\n")
    markdown = (tmp_path / "t.md").read_text()
    assert r"\<b\>=ce" in markdown and r"ls\_0.1\&\#\$%{x}\~^\\" in markdown
    assert "'<b>=ce" not in (tmp_path / "t.csv").read_text() and ",'=" not in (tmp_path / "t.csv").read_text()
    page = (tmp_path / "t.html").read_text()
    assert "<b>=ce" not in page and "&lt;b&gt;=ce" in page
    assert page.index("<table class='summary'>") < page.index("<h2>")  # the table is the first screen


@pytest.mark.slow
def test_the_table_fits_100_columns_in_a_pipe(cli, tmp_path):
    paths = write_study(tmp_path, datasets=("cifar10", "cifar100", "tinyimagenet"),
                                recipes=("cross_entropy", "label_smoothing_0.1", "focal_loss_gamma3"), seeds=(0, 1),
                                n=120, n_val=60)
    result = cli("study", *paths, "--pattern", PATTERN, "--scores", "msp", "--baseline", "cross_entropy",
                 "--bootstrap", "30")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert sum("tinyimagenet" in line for line in lines) >= 1 and "mean rank over the 3 data sets" in result.stdout
    assert "label_smoothing_0.1" in result.stdout


def test_a_single_run_gets_a_note(cli, tmp_path):
    paths = [write_run(tmp_path / "d" / "a_seed0.parquet"), write_run(tmp_path / "d" / "b_seed0.parquet",
                                                                                      run_seed=1),
             write_run(tmp_path / "d" / "b_seed1.parquet", run_seed=2)]
    result = cli("study", *paths, "--pattern", PATTERN, "--scores", "msp", "--bootstrap", "30", "--baseline", "b")
    assert result.exit_code == 0, result.stderr
    assert "note: one run only: a; its interval holds the rows' noise only" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_the_figures_of_each_data_set(cli, tmp_path):
    paths = write_study(tmp_path / "runs", datasets=("c10", "c100"), recipes=("ce", "ls"), seeds=(0, 1), n=150,
                        n_val=60)
    result = cli("study", *paths, "--pattern", PATTERN, "--scores", "msp", "--bootstrap", "30", "--plots",
                 tmp_path / "plots", "--plot-format", "svg", "-q")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "c100_study_metrics.svg", "c100_study_rc.svg", "c10_study_metrics.svg", "c10_study_rc.svg"]
