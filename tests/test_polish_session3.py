"""Rough edges of what selcal writes for a person (session 3): user text in every figure is drawn
literally (a ``--score-col`` named ``conf$x$`` is neither mathtext nor an error), the leaderboard
in a pipe keeps every line within 100 columns, model names break at natural points in the HTML
report, and the report's summary says which calibrator is best per model.

Each test reads what selcal puts out (the matplotlib Text artists before the figure is saved,
the printed lines, the HTML), so that it fails on the output of the code before the change.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import selcal
from selcal.figures import render as figure_render

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figure_texts import drawn_texts  # noqa: E402

# ============================================================ figures: user text, never mathtext
HOSTILE_SCORES = ("conf$x$", "$\\frac{$")  # a formula if parsed; a malformed one that raises if parsed
HOSTILE_UNCERTAINTY = "u$v"
HOSTILE_MODELS = ("a$b", "m_$x^2$")


def hostile_dump(folder, name: str, seed: int):
    rng = np.random.default_rng(seed)
    n, k = 900, 5
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += 2.0
    msp = np.exp(logits.max(axis=1)) / np.exp(logits).sum(axis=1)
    path = folder / f"{name}.parquet"
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), k),
                             "label": labels, HOSTILE_SCORES[0]: msp, HOSTILE_SCORES[1]: np.sqrt(msp),
                             HOSTILE_UNCERTAINTY: -msp,
                             "group": np.where(rng.random(n) < 0.5, "g$1$", "g2")}), path)
    return path


def test_score_columns_and_model_names_with_dollars_are_drawn_literally(tmp_path, monkeypatch):
    """Every figure kind of two models whose names and score columns hold ``$``: drawn without error
    (before: ``$\\frac{$`` raised in mathtext while the rc figure was saved; ``conf$x$`` was drawn as
    "conf" and an italic x), and each such name is drawn as written, never parsed as mathtext."""
    paths = [hostile_dump(tmp_path, name, seed) for seed, name in enumerate(HOSTILE_MODELS)]
    result = selcal.evaluate([str(p) for p in paths], scores="msp,max_logit,temp", score_cols=list(HOSTILE_SCORES),
                             uncertainty_cols=[HOSTILE_UNCERTAINTY], group_col="group")
    texts: dict[str, list] = {}
    real_render = figure_render.render

    def capture(figure, fmt):
        texts[current] = drawn_texts(figure)  # before the figure is saved (and cleared)
        return real_render(figure, fmt)

    monkeypatch.setattr(figure_render, "render", capture)
    jobs = figure_render.plan_figures(result, ls_alpha=[0.0, 0.1])
    for job in jobs:
        current = job.stem
        assert figure_render._draw(job, result.models, "png"), job.stem  # drawn (no mathtext error)
    assert {"rc", "reliability", "smooth", "overlay_rc", "errors_by_group"} <= {job.kind for job in jobs}
    literal = (*HOSTILE_SCORES, HOSTILE_UNCERTAINTY, *HOSTILE_MODELS, "g$1$")
    for stem, found in texts.items():
        for raw, shown, math_mode in found:
            if any(fragment in raw for fragment in ("conf", "frac", "u$v", "u\\$v", "a$b", "a\\$b", "m_", "g$1", "g\\$1")):
                assert math_mode is False, (stem, raw)  # user text is never parsed
    everything = "\n".join(shown for found in texts.values() for _, shown, _ in found)
    for name in literal:
        assert name in everything, name  # and drawn as written
    rc = "\n".join(shown for _, shown, _ in texts["a_b_rc"])
    assert "conf$x$: AURC" in rc and "$\\frac{$: AURC" in rc and "u$v: AURC" in rc
    overlay = [shown for _, shown, _ in texts["overlay_rc"]]
    assert "conf$x$" in overlay and "$\\frac{$" in overlay  # the panel titles
    groups = [shown for _, shown, _ in texts["errors_by_group"]]
    assert "conf$x$" in groups and "$\\frac{$" in groups


def test_score_label_is_the_one_helper():
    from selcal.figures.base import score_label, user_text

    assert score_label("conf$x$") == user_text("conf$x$") == "conf\\$x\\$"
    assert score_label("$\\frac{$", escape=False) == "$\\frac{$"  # for a text drawn with parse_math=False
    assert score_label("x" * 90, limit=40) == user_text("x" * 90, 40)


# ============================================================ the leaderboard in a pipe: 100 columns
SAMPLES = Path(__file__).resolve().parent.parent / "sample_logits"
LONG = "resnet50_imagenet_finetuned_with_label_smoothing_" * 2


def test_every_leaderboard_line_in_a_pipe_fits_100_columns(tmp_path):
    """``selcal evaluate`` of several models with long names, in a pipe (CliRunner's stdout is no
    terminal): every line of the tables, the note and the calibrators at most 100 columns (before:
    tables 160 wide, the note one line of 270 columns); the note wrapped at word boundaries (its
    words whole, in order); long names cut in their middle, so models that differ at their end stay
    apart."""
    import shutil

    from rich.cells import cell_len
    from typer.testing import CliRunner

    from selcal.cli import app
    from selcal.report.leaderboard import _leaderboard_note, _shown_columns, leaderboard

    files = [str(SAMPLES / "calibrator_cifar10_resnet50_ce.parquet")]
    for seed, alpha in enumerate(("0", "0.05", "0.1")):  # lspair_alpha0: pnorm falls back (the note's '(fb)')
        files.append(str(tmp_path / f"{LONG}seed{seed}.parquet"))
        shutil.copy(SAMPLES / f"lspair_alpha{alpha}.parquet", files[-1])
    for scores in ("msp,max_logit,pnorm,temp", "calibrators"):
        run = CliRunner().invoke(app, ["evaluate", *files, "--scores", scores], env={"COLUMNS": "300"})
        assert run.exit_code == 0, run.output
        lines = run.stdout.splitlines()
        assert max(cell_len(line) for line in lines) <= 100, [line for line in lines if cell_len(line) > 100]
        result = selcal.evaluate(files, scores=scores)
        rows = leaderboard(result)
        note = _leaderboard_note(_shown_columns(rows), rows)
        assert len(note) > 100
        start = next(i for i, line in enumerate(lines) if line.startswith("in %: accuracy, "))
        wrapped = [lines[start]]
        for line in lines[start + 1:]:
            if not line.startswith("  "):
                break
            wrapped.append(line[2:])
        assert len(wrapped) > 1 and " ".join(wrapped) == note  # every word whole
        for seed in range(3):
            assert sum(f"seed{seed} " in line for line in lines if "│" in line) >= 1  # told apart
        if scores == "calibrators":
            assert "calibrators of calibrator_cifar10_resnet50_ce" in lines


def test_wide_characters_count_twice_in_a_pipe(tmp_path):
    """Names of wide (East Asian) characters, two columns each: cut and wrapped by columns, not
    characters, so their lines stay within 100 columns too (the calibrators' line over a model)."""
    import shutil

    from rich.cells import cell_len
    from typer.testing import CliRunner

    from selcal.cli import app

    files = []
    for seed, alpha in enumerate(("0", "0.1")):
        files.append(str(tmp_path / f"{'模型' * 30}_{seed}.parquet"))
        shutil.copy(SAMPLES / f"lspair_alpha{alpha}.parquet", files[-1])
    run = CliRunner().invoke(app, ["evaluate", *files, "--scores", "calibrators"])
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= 100, [line for line in lines if cell_len(line) > 100]
    assert any(line.startswith("calibrators of 模型") for line in lines)
    cut = [line for line in lines if line.startswith("模型") and "…" in line and "_0 │" in line]
    assert cut  # cut in the middle, the end kept


def test_a_name_with_markup_is_shown_as_written_over_the_calibrators():
    """The line over a model's calibrators is plain text: a name with ``[`` is not shown with the
    backslash of rich's markup escape (before: ``calibrators of m\\[x]``)."""
    import io

    from rich.console import Console

    from selcal.report import calibrators

    row = {"model": "m[x]", "calibrators": {"confidence": None, "rows": [
        {"score": "msp", "accuracy": 0.9, "accuracy_ci": None, "accuracy_best": True,
         **{k: 0.1 for k in calibrators.AXES}, **{f"{k}_ci": None for k in calibrators.AXES},
         **{f"{k}_best": True for k in calibrators.AXES}}]}}
    console = Console(width=100, file=io.StringIO(), color_system=None)
    calibrators.render_terminal([row], console)
    assert "calibrators of m[x]" in console.file.getvalue().splitlines()


# ============================================================ the HTML report: calibrators at the top, names
def calibrated_result(names, scores=("msp", "max_logit", "temp", "vector", "isotonic")):
    options = selcal.Options(scores=scores, bins=10)
    models = []
    for seed, name in enumerate(names):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 4, size=900)
        logits = rng.normal(size=(900, 4)) * (1 + seed % 2)
        logits[np.arange(900), labels] += 1.5
        models.append(selcal.evaluate_arrays(logits[300:], labels[300:], logits[:300], labels[:300], name=name,
                                             options=options))
    return selcal.EvaluationResult(models=models, options=options)


def test_the_summary_names_the_best_calibrator_of_every_model_on_each_axis():
    """Near the top (before the first model's section): a table with a row per model and, for ECE,
    smooth ECE and AURC, the best of its calibrators (msp, temp, the post-hoc ones) and its value,
    checked against a minimum taken here from the scores; the tally under it counts them."""
    import re

    from selcal.report import html as html_report

    names = ["<script>alert(1)</script>", "runs/a_b-c.d", "plain"]
    result = calibrated_result(names)
    page = html_report.render_report(result, [])
    start = page.index("<table class='calibrators-best'>")
    assert start < page.index("<h2 id='model-")  # in the summary, before the models' sections
    table = page[start:page.index("</table>", start)]
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/<wbr>script&gt;" in table
    rows = re.findall(r"<tr><td><a href='#([^']*)'>(.*?)</a></td>(.*?)</tr>", table)
    assert len(rows) == len(names)
    tally = {}
    for model, (href, shown, cells) in zip(result.models, rows):
        assert href == html_report._anchor(model.name) + "-calibrators" and f"id='{href}'" in page
        assert shown.replace("<wbr>", "") == html_report._e(model.name)
        found = re.findall(r"<td class='best'>(.*?)</td><td>(.*?)</td>", cells)
        assert len(found) == 3
        for key, (best, value) in zip(("ece", "smece", "aurc"), found):
            members = ["msp", "temp", "vector", "isotonic"]  # the calibrators group, max_logit not in it
            shown_values = {m: round(100 * model.scores[m][key], 2) for m in members}
            lowest = min(shown_values.values())
            want = [m for m in members if shown_values[m] == lowest]
            assert best.split(", ") == want and value == f"{lowest:.2f}", (model.name, key)
            for m in want:
                tally.setdefault(key, {}).setdefault(m, 0)
                tally[key][m] += 1
    note = re.search(r"Best for how many models: (.*?)\.</p>", page[start:]).group(1)
    for key, label in (("ece", "ECE"), ("smece", "smooth ECE"), ("aurc", "AURC")):
        part = re.search(rf"(?:^|; ){label}: ([^;]*)", note).group(1)
        assert dict((n, int(c)) for n, c in (item.rsplit(" ", 1) for item in part.split(", "))) == tally[key]


def test_no_calibrators_no_summary_table():
    from selcal.report import html as html_report

    page = html_report.render_report(calibrated_result(["a", "b"], scores=("msp", "temp")), [])
    assert "calibrators-best" not in page.split("<style>")[1].split("</style>")[1]


def test_names_in_the_report_break_at_natural_points_after_escaping():
    from selcal.report import html as html_report
    from selcal.escape import html_name

    assert html_name("a/b_c-d.e") == "a/<wbr>b_<wbr>c-<wbr>d.<wbr>e"
    assert html_name("x<wbr>&y") == "x&lt;wbr&gt;&amp;y"  # a name's own markup stays text
    assert html_name("é\x1b_") == "é\\x1b_"  # escapes first; nothing after the last character
    page = html_report.render_report(calibrated_result(["runs/resnet50_ls-0.1.seed0", "b"]), [])
    wanted = "runs/<wbr>resnet50_<wbr>ls-<wbr>0.<wbr>1.<wbr>seed0"
    summary = page[page.index("<table class='summary'>"):]
    assert f">{wanted}</a></td>" in summary[:summary.index("</table>")]  # the summary (before: no <wbr>)
    assert f"<h2 id='model-runs-resnet50-ls-0-1-seed0'>{wanted}</h2>" in page
