"""Figures and the report without rough edges (issue 17, figures; issue 16, user text and quiet runs).

Each test reads what is put on the matplotlib artists (axis limits, legend texts, the
string matplotlib will draw and whether it parses it as mathtext) or the HTML text, so
that each can fail on a figure drawn the old way: the histogram's log axis ran to 60 N,
one legend entry covered both kinds of calibration gap, vmax_msp overlays had their own
y scales, more than 6 models left overlay_vmax_msp out silently, user text went through
mathtext, non-Latin names warned about missing glyphs, and every group got its own bar.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import drawn_texts  # noqa: E402
from typer.testing import CliRunner

import selcal
from selcal import figures as plots
from selcal.cli import app
from selcal.figures import render as figure_render
from selcal.report import html as html_report


def logits_for(n, k=5, seed=0, scale=2.0, margin=2.0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, size=n)
    logits = rng.normal(0.0, 1.0, size=(n, k))
    logits[np.arange(n), labels] += margin
    return logits * scale / 2.0, labels


def model(n=600, name="m", seed=0, scale=2.0, scores=("msp", "max_logit"), groups=None, log_probabilities=False):
    logits, labels = logits_for(n + 200, seed=seed, scale=scale)
    if log_probabilities:
        logits = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    options = selcal.Options(scores=scores)
    return selcal.evaluate_arrays(logits[200:], labels[200:], logits[:200], labels[:200], options=options,
                                  name=name, groups=groups)


def result_of(*models, **options):
    return selcal.EvaluationResult(models=list(models), options=selcal.Options(**options))


# ============================================================ reliability diagram
@pytest.mark.slow
def test_histogram_axis_ends_at_the_next_power_of_ten():
    m = model(n=12_000, scale=5.0)  # confident: the top bin holds about 10^4 rows
    figure = plots.figure_reliability(m, 15)
    hist = figure.axes[1]
    counts = np.array([bar.get_height() for bar in hist.patches])
    largest = counts.max()
    assert 1_000 < largest < 12_000
    expected = 10.0 ** (math.floor(math.log10(largest)) + 1)
    assert hist.get_ylim()[1] == expected == plots.histogram_top(counts)
    assert expected <= 10 * largest  # today: 60 N, two decades above the largest bar


def fake_model(confidence, correct, name="fake"):
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, bool)
    data = plots.reliability_data(confidence, correct, 10)
    rows = SimpleNamespace(log_msp=np.log(confidence), correct=correct)
    return SimpleNamespace(name=name, n_eval=confidence.size, rows=rows, scores={"msp": {"ece": data.ece()}},
                           num_classes=2, confidences={"msp": confidence})


def gap_bars(figure):
    ax = figure.axes[0]
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    colours = {tuple(np.round(p.get_facecolor()[:3], 3)) for c in ax.containers for p in c
               if c.get_label().startswith("gap")}
    return labels, colours


def test_over_and_under_confident_gaps_are_told_apart():
    # bin 0.5-0.6: confidence 0.55, accuracy 1 (under-confident); bin 0.9-1: 0.95 and 0.5 (over).
    both = fake_model([0.55] * 4 + [0.95] * 4, [1, 1, 1, 1, 1, 0, 1, 0])
    labels, colours = gap_bars(plots.figure_reliability(both, 10))
    over, under = plots.GAP_STYLES["over"]["label"], plots.GAP_STYLES["under"]["label"]
    assert over in labels and under in labels and len(colours) == 2
    only_over = fake_model([0.95] * 4, [1, 0, 1, 0])
    labels, colours = gap_bars(plots.figure_reliability(only_over, 10))
    assert over in labels and under not in labels and len(colours) == 1


# ======================================================================= vmax_msp
def test_vmax_units_and_shared_y_axes():
    small, large = model(name="small", scale=1.0, seed=1), model(name="large", scale=8.0, seed=2)
    single = plots.figure_vmax_msp(small)
    assert "logit units" in single.axes[0].get_ylabel() and "logit units" in single.axes[1].get_ylabel()
    figure = plots.figure_vmax_msp_overlay([small, large])
    tops, diffs = figure.axes[0::2], figure.axes[1::2]
    assert tops[0].get_ylim() == tops[1].get_ylim()
    assert diffs[0].get_ylim() != diffs[1].get_ylim()  # each its own scale, and the title says so
    stats = [plots.sliding_window_stats(np.exp(m.rows.log_msp), m.rows.max_logit, m.rows.correct)
             for m in (small, large)]
    highest = max(np.nanmax(s.mean + s.std) for st in stats for s in (st.correct, st.incorrect))
    assert tops[0].get_ylim()[1] >= highest  # the large model's band fits the small model's panel too
    assert "upper panels: same y axis; difference panels: each its own y scale" in figure._suptitle.get_text()
    limits = (-3.0, 30.0)
    page = plots.figure_vmax_msp_overlay([small, large], limits=limits, page=(2, 3))
    assert page.axes[0].get_ylim() == limits and page.axes[2].get_ylim() == limits
    assert "(2 of 3)" in page._suptitle.get_text() and "of all 3 figures" in page._suptitle.get_text()


@pytest.mark.slow
def test_vmax_msp_not_drawn_on_log_probabilities():
    m = model(name="logp", log_probabilities=True)
    assert any("log-probabilities" in w for w in m.warnings)  # the table's warning, same rule
    assert "log-probabilities" in plots.vmax_msp_skip_reason(m)
    notes = []
    kinds = [f.kind for f in plots.render_figures(result_of(m, scores=("msp", "max_logit")), notes=notes)]
    assert "vmax_msp" not in kinds and "rc" in kinds
    assert notes == [f"logp_vmax_msp not drawn: {plots.vmax_msp_skip_reason(m)}"]
    assert plots.vmax_msp_skip_reason(model(name="ok")) is None


@pytest.mark.slow
def test_more_than_six_models_get_several_overlay_figures():
    assert plots.overlay_pages(14) == [range(0, 5), range(5, 10), range(10, 14)]
    assert all(len(p) <= plots.OVERLAY_VMAX_MODELS for n in range(1, 40) for p in plots.overlay_pages(n))
    assert [i for n in range(1, 40) for i in itertools.chain(*plots.overlay_pages(n))] == \
        [i for n in range(1, 40) for i in range(n)]
    models = [model(n=300, name=f"m{i}", seed=i, scale=1.0 + i, scores=("msp",)) for i in range(8)]
    notes = []
    first = list(itertools.islice(plots.render_figures(result_of(*models, scores=("msp",)), notes=notes), 3))
    assert [f.stem for f in first] == ["overlay_rc", "overlay_vmax_msp_1", "overlay_vmax_msp_2"]
    assert {f.kind for f in first[1:]} == {"overlay_vmax_msp"}
    assert "Models 1–4 of 8" in first[1].caption and "Models 5–8 of 8" in first[2].caption
    assert notes == []


@pytest.mark.slow
def test_cli_names_the_figures_it_does_not_draw(tmp_path):
    logits, labels = logits_for(800)
    logits = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    path = tmp_path / "logp.parquet"
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 5),
                             "label": pa.array(labels)}), path)
    out = tmp_path / "figs"
    run = CliRunner().invoke(app, ["evaluate", str(path), "--scores", "msp,max_logit", "--plots", str(out)])
    assert run.exit_code == 0, run.stderr
    assert "selcal: note: logp_vmax_msp not drawn: the logits look like log-probabilities" in run.stderr
    assert not (out / "logp_vmax_msp.png").exists() and (out / "logp_rc.png").exists()


# ==================================================================== user text
HOSTILE = "a$b_c^d\\e"
HOSTILE_GROUPS = ["$x$", "$\\frac{$", "_hidden", "^", "plain"]


@pytest.mark.slow
def test_user_text_is_drawn_literally_and_never_parsed(tmp_path):
    rng = np.random.default_rng(3)
    groups = np.array(HOSTILE_GROUPS)[rng.integers(0, len(HOSTILE_GROUPS), size=600)]
    hostile = model(name=HOSTILE, groups=groups)
    other = model(name="$\\alpha_{$", seed=4, groups=groups)  # a malformed formula if parsed
    result = result_of(hostile, other, scores=("msp", "max_logit"))
    written = plots.write_plots(result, tmp_path, "png", max_points=400)  # today: ValueError from mathtext
    assert {f.kind for f in written} >= {"rc", "reliability", "vmax_msp", "errors_by_group", "overlay_rc"}
    figures = [plots.figure_rc(hostile), plots.figure_reliability(hostile), plots.figure_vmax_msp(hostile),
               plots.figure_rc_overlay([hostile, other]), plots.figure_vmax_msp_overlay([hostile, other]),
               plots.figure_errors_by_group([hostile, other])]
    shown = []
    for figure in figures:
        for raw, drawn, math_mode in drawn_texts(figure):
            if any(name in drawn for name in (HOSTILE, "$\\alpha_{$", *HOSTILE_GROUPS[:2])):
                assert math_mode is False, raw
            shown.append(drawn)
    text = "\n".join(shown)
    for literal in (HOSTILE, "$\\alpha_{$", *HOSTILE_GROUPS):
        assert literal in text, literal
    legend = [t.get_text() for t in figures[-1].legends[0].get_texts()]
    assert "_hidden" in legend  # matplotlib's automatic legend would have dropped it
    overlay_legend = [t.get_text() for t in figures[3].axes[0].get_legend().get_texts()]
    assert any(t.startswith("$\\alpha_{$".replace("$", "\\$")) for t in overlay_legend)


def test_user_text_helper():
    assert plots.user_text("a$b") == "a\\$b"
    for raw in (HOSTILE, "$x$", "\\$", "$$", "a\\\\$b$"):
        from matplotlib.text import Text

        shown, math_mode = Text(text=plots.user_text(raw))._preprocess_math(plots.user_text(raw))
        assert (shown, math_mode) == (raw, False)


# ================================================================== quiet success
@pytest.mark.slow
def test_quiet_success_for_non_latin_names_and_many_groups(tmp_path, caplog):
    import matplotlib

    rng = np.random.default_rng(5)
    groups = np.array([f"群{i}_β" for i in range(40)])[rng.integers(0, 40, size=600)]
    models = [model(n=600, name="模型_β Ωmega/δ", groups=groups),
              model(n=600, name="resnet50_" * 15 + "end", seed=2, groups=groups)]  # a long name squeezes axes
    result = result_of(*models, scores=("msp", "max_logit"))
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        written = plots.write_plots(result, tmp_path, "png")
        with matplotlib.rc_context(plots.base.style()):  # the SVG and PDF backends draw glyphs on their own
            for fmt in ("svg", "pdf"):
                plots.base.render(plots.figure_errors_by_group(models), fmt)
                plots.base.render(plots.figure_rc(models[0]), fmt)
    assert not [str(w.message) for w in caught]
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")]
    assert len(written) == 2 + 1 + 4 * 2  # overlays, errors by group, rc + reliability + smooth + vmax per model
    drawn = plots.user_text("模型_β")
    assert drawn.endswith("_β") and ("模型" in drawn or drawn.startswith(plots.REPLACEMENT_CHARACTER * 2))


# ================================================================ many groups
@pytest.mark.slow
def test_thousands_of_groups_draw_the_top_ten_and_other():
    n = 6000
    rng = np.random.default_rng(6)
    groups = np.array([f"g{i:04d}" for i in range(3000)])[rng.integers(0, 3000, size=n)]
    m = model(n=n, name="wide", groups=groups, scores=("msp",))
    figure = plots.figure_errors_by_group([m], coverage=0.5)
    legend = figure.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    stack = plots.errors_at_coverage_by_group(m.curves["msp"], m.score_values["msp"], m.rows.correct, m.groups, 0.5)
    shown, others = plots.shown_groups([stack])
    assert len(shown) == plots.MAX_GROUP_BARS and len(labels) == plots.MAX_GROUP_BARS + 1
    assert labels[-1] == f"other ({len(others):,} groups)" and len(shown) + len(others) == len(stack.groups)
    # the drawn groups are those with the most errors (brute force over the rows)
    accepted = m.score_values["msp"] >= m.curves["msp"].thresholds[np.flatnonzero(m.curves["msp"].coverage >= 0.5)[0]]
    errors = {g: int(np.count_nonzero(accepted & ~m.rows.correct & (groups == g))) for g in set(groups.tolist())}
    assert min(errors[g] for g in shown) >= max(errors[g] for g in others)
    assert sum(bar.get_height() for c in figure.axes[0].containers for bar in c) == stack.errors
    assert "10 with the most errors" in legend.get_title().get_text()
    few = plots.figure_errors_by_group([model(n=600, groups=np.array(["a", "b"] * 300))])
    assert [t.get_text() for t in few.legends[0].get_texts()] == ["a", "b"]


# ====================================================================== the report
@pytest.mark.slow
def test_report_summary_settings_and_warnings_first(tmp_path):
    good = model(name="good", scores=("msp", "temp"))
    logp = model(name="logp", scores=("msp", "temp"), log_probabilities=True)
    result = selcal.EvaluationResult(models=[good, logp], options=selcal.Options(scores=("msp", "temp"), bins=7,
                                                                                 seed=3))
    notes = []
    path = html_report.write_report(result, tmp_path / "r.html", notes=notes,
                                    plot_settings={"group_col": "source", "ignore_label": 255})
    page = path.read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", " ", page)
    assert any(n.startswith("logp_vmax_msp not drawn: the logits look like log-probabilities") for n in notes)
    assert any(n.startswith("overlay_vmax_msp not drawn: fewer than two models") for n in notes)
    warnings_at = page.index("class='warnings'")
    assert warnings_at < page.index("<h2 id='summary'>Summary")
    assert "look like log-probabilities" in page[warnings_at:page.index("<h2 id='summary'>Summary")]
    assert "1 figure of logp" in page[warnings_at:page.index("<h2 id='summary'>Summary")]  # grouped, with its count
    summary = page[page.index("<h2 id='summary'>Summary"):page.index("</table>", page.index("<h2 id='summary'>Summary"))]
    assert "ECE before T: msp (%)" in summary and "ECE after T: temp (%)" in summary
    for m in (good, logp):
        assert f"{100 * m.scores['msp']['ece']:.2f}" in summary and f"{100 * m.scores['temp']['ece']:.2f}" in summary
    settings = text[text.index("Settings"):]
    for key in ("bins", "seed", "aurc_estimator", "p_grid", "pnorm_objective", "temp_objective", "val_fraction",
                "group_col", "ignore_label", "at_coverage"):
        assert re.search(rf"\b{key}\b", settings), key
    assert re.search(r"\bbins\s+7\s+15\b", settings)  # the value, then the default it differs from
    assert "chunk_rows" not in settings


@pytest.mark.slow
def test_cli_report_settings_hold_every_option(tmp_path):
    logits, labels = logits_for(900)
    source = np.where(np.arange(900) % 3 == 0, "sketch", "photo")
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 5),
                             "label": pa.array(labels), "source": pa.array(source)}), path)
    report = tmp_path / "r.html"
    run = CliRunner().invoke(app, ["evaluate", str(path), "--scores", "msp,temp", "--group-col", "source",
                                   "--bins", "9", "--aurc-estimator", "trapz", "--bootstrap", "20",
                                   "--report", str(report), "-q"])
    assert run.exit_code == 0, run.stderr
    text = re.sub(r"<[^>]+>", " ", report.read_text(encoding="utf-8"))
    settings = text[text.index("Settings"):]
    for key, value in (("group_col", "source"), ("bins", "9"), ("aurc_estimator", "trapz"),
                       ("bootstrap_resamples", "20"), ("plot_format", "png")):
        assert re.search(rf"\b{key}\s+{value}\b", settings), key


# ======================================================== every score of the registry
@pytest.mark.slow
def test_every_registered_score_is_drawn_with_its_own_colour():
    from selcal.scores import REGISTRY, score_names

    names = score_names(["all"])
    logits, labels = logits_for(1400, seed=8)
    m = selcal.evaluate_arrays(logits[400:], labels[400:], logits[:400], labels[:400],
                               options=selcal.Options(scores=names), name="all")
    rc = plots.figure_rc(m)
    lines = [line for line in rc.axes[0].lines if line.get_gid() != "error rate"]
    assert len(lines) == len(names)
    assert len({(line.get_color(), str(line.get_linestyle())) for line in lines}) == len(names)
    overlay = plots.figure_rc_overlay([m, m])
    assert [ax.get_title() for ax in overlay.axes if ax.get_visible()] == [plots.SCORE_LABELS.get(n, n) for n in names]
    probability = [n for n in names if REGISTRY[n].has_probabilities]
    reliability = plots.figure_reliability(m, 15)
    assert len(reliability.axes) == 2 * len(probability)
    for name in probability:  # each panel's bins give the reported ECE
        data = plots.reliability_data(np.exp(m.score_values[name]), m.rows.correct, 15)
        assert data.ece() == pytest.approx(m.scores[name]["ece"], abs=1e-12), name


@pytest.mark.slow
def test_cli_run_with_figures_writes_no_warning(tmp_path):
    """A whole `selcal evaluate --plots --report` in a fresh interpreter: stderr holds selcal's own lines only."""
    import os
    import subprocess
    import sys

    logits, labels = logits_for(1500, seed=9)
    rng = np.random.default_rng(9)
    source = np.array([f"域{i}_$x$" for i in range(60)])[rng.integers(0, 60, size=1500)]
    path = tmp_path / "模型_β$a_b^c.parquet"
    pq.write_table(pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 5),
                             "label": pa.array(labels), "source": pa.array(source)}), path)
    code = "import sys; from selcal.cli import run; sys.argv[0] = 'selcal'; run()"
    done = subprocess.run([sys.executable, "-W", "default", "-c", code, "evaluate", str(path), "--plots",
                           str(tmp_path / "figs"), "--report", str(tmp_path / "r.html"), "--group-col", "source",
                           "--scores", "msp,max_logit,temp"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONWARNINGS="default"))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("selcal: ") for line in lines), done.stderr
    assert not re.search(r"Warning|warn\(|Glyph|constrained", done.stderr), done.stderr


@pytest.mark.slow
def test_a_probability_column_gets_its_reliability_diagram(tmp_path):
    """A file with no logits, only a confidence in [0, 1], a prediction and a label: the
    confidence has an ECE, so it gets a reliability panel whose bins give that ECE."""
    rng = np.random.default_rng(10)
    confidence = rng.uniform(0.2, 1.0, size=2000)
    labels = rng.integers(0, 10, size=2000)
    pred = np.where(rng.random(2000) < confidence, labels, (labels + 1) % 10)
    path = tmp_path / "conf.parquet"
    pq.write_table(pa.table({"confidence": confidence, "pred": pred, "label": labels}), path)
    result = selcal.evaluate([str(path)])
    m = result.models[0]
    assert "ece" in m.scores["confidence"]
    notes = []
    kinds = [f.kind for f in plots.render_figures(result, notes=notes)]
    assert kinds == ["rc", "reliability", "smooth"] and notes == []
    figure = plots.figure_reliability(m, result.options.bins)
    assert "confidence" in figure.axes[0].get_title()
    data = plots.reliability_data(m.score_values["confidence"], m.rows.correct, result.options.bins)
    assert data.ece() == pytest.approx(m.scores["confidence"]["ece"], abs=1e-12)


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


@pytest.mark.slow
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
