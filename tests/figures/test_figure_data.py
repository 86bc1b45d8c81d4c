"""Figures: the data each figure draws is the data selcal computed, and the files are sound.

Pixels are not compared. Instead: every data-preparation function of ``selcal.figures`` is
checked against a brute-force reference or the result's own numbers (AURC, ECE, error
counts), the lines actually put on the matplotlib axes are checked against those
functions, and every written file is decoded (PNG pixels, SVG as XML, PDF header and
trailer). Rendering leaves no global matplotlib state behind.
"""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, write_dump
from typer.testing import CliRunner

import selcal
from selcal import figures as plots
from selcal.cli import app
from selcal.metrics.selective import risk_coverage

REPO = ROOT
LS_PAIR = [REPO / "sample_logits" / "lspair_alpha0.parquet", REPO / "sample_logits" / "lspair_alpha0.1.parquet"]


# ------------------------------------------------------------------------- data
def synthetic(n: int, k: int = 5, seed: int = 0, scale: float = 2.0, shifted_share: float = 0.3):
    """Logits (multiples of 1/8, so some scores tie), labels and a group per row."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, size=n)
    logits = rng.normal(0.0, 1.0, size=(n, k))
    logits[np.arange(n), labels] += scale
    groups = np.where(rng.random(n) < shifted_share, "shifted", "clean")
    logits[groups == "shifted"] *= 1.8
    logits[groups == "shifted"] += rng.normal(0.0, 1.5, size=((groups == "shifted").sum(), k))
    return np.round(logits * 8) / 8, labels, groups


def model_result(n=1500, seed=0, name="model", groups=True, **kw):
    logits, labels, group = synthetic(n + 600, seed=seed, **kw)
    return selcal.evaluate_arrays(logits[600:], labels[600:], logits[:600], labels[:600], name=name,
                                  groups=group[600:] if groups else None)


@pytest.fixture(scope="module")
def pair():
    """Two models with groups, as selcal.evaluate returns them."""
    models = [model_result(seed=1, name="alpha0"), model_result(seed=2, name="alpha0.1", scale=2.5)]
    return selcal.EvaluationResult(models=models, options=selcal.Options())


# ====================================================== 1. risk-coverage points
def step_value(points: plots.RCPoints, coverage_pct: float) -> float:
    """The risk the drawn polyline shows just left of ``coverage_pct`` (steps are vertical)."""
    i = int(np.searchsorted(points.coverage, coverage_pct, side="left"))
    return float(points.risk[i])


def test_rc_points_are_the_operating_points_as_steps():
    score = np.array([0.9, 0.8, 0.8, 0.8, 0.5, 0.5, 0.1])
    correct = np.array([1, 1, 0, 1, 0, 1, 0], dtype=bool)
    curve = risk_coverage(score, correct)
    pts = plots.rc_curve_points(curve)
    # Three tie groups: 1, 3 and 2 rows, then 1.
    assert pts.coverage.tolist() == pytest.approx([0, 100 / 7, 100 / 7, 400 / 7, 400 / 7, 600 / 7, 600 / 7, 100])
    assert pts.risk.tolist() == pytest.approx([0, 0, 25, 25, 100 / 3, 100 / 3, 300 / 7, 300 / 7])
    assert not pts.thinned
    # Every operating point is a vertex, and the step holds r_g over (c_{g-1}, c_g] (the risk@c rule).
    for cov, risk in zip(100 * curve.coverage, 100 * curve.risk):
        assert step_value(pts, cov) == pytest.approx(risk)


def test_rc_points_area_is_the_reported_aurc():
    """With no ties the area under the drawn steps is (1/N) sum_k r_k, the reported AURC."""
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3000, 6))
    labels = rng.integers(0, 6, size=3000)
    model = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp", "max_logit")))
    for score in ("msp", "max_logit"):
        pts = plots.rc_curve_points(model.curves[score], max_points=None)
        area = float(np.sum(np.diff(pts.coverage) * pts.risk[1:])) / 1e4
        assert area == pytest.approx(model.scores[score]["aurc"], rel=1e-12)


def test_rc_thinning_keeps_the_shape():
    rng = np.random.default_rng(4)
    n = 200_000
    score = np.round(rng.normal(size=n), 3)  # many ties
    correct = rng.random(n) < 1 / (1 + np.exp(-3 * score))
    curve = risk_coverage(score, correct)
    full = plots.rc_curve_points(curve, max_points=None)
    thin = plots.rc_curve_points(curve, max_points=2000)
    assert thin.thinned and thin.coverage.size <= 2000 < full.coverage.size
    # Every kept vertex is a vertex of the full curve, in order, first and last included.
    index = {(x, y): i for i, (x, y) in enumerate(zip(full.coverage.tolist(), full.risk.tolist()))}
    kept = [index[(x, y)] for x, y in zip(thin.coverage.tolist(), thin.risk.tolist())]
    assert kept == sorted(kept) and kept[0] == 0 and kept[-1] == full.coverage.size - 1
    # In every coverage bucket the drawn band spans the same risks as the full curve.
    buckets = 2000 // 4
    full_bucket = np.minimum((full.coverage / 100 * buckets).astype(int), buckets - 1)
    thin_bucket = np.minimum((thin.coverage / 100 * buckets).astype(int), buckets - 1)
    for b in np.unique(full_bucket):
        assert full.risk[full_bucket == b].min() == thin.risk[thin_bucket == b].min()
        assert full.risk[full_bucket == b].max() == thin.risk[thin_bucket == b].max()
    # Where the curve is settled (coverage >= 1%), the thinned line is within one bucket of the full one.
    for cov in np.linspace(1, 100, 357):
        near = (full.coverage >= cov - 100 / buckets) & (full.coverage <= cov + 100 / buckets)
        assert full.risk[near].min() - 1e-9 <= step_value(thin, cov) <= full.risk[near].max() + 1e-9


def test_rc_figure_draws_the_computed_curves(pair):
    model = pair.models[0]
    with plots.base.mpl()[0].rc_context(plots.base.STYLE):
        figure = plots.figure_rc(model)
    lines = {line.get_label(): line for line in figure.axes[0].lines}
    for score, curve in model.curves.items():
        (label,) = [lab for lab in lines if lab.startswith(plots.SCORE_LABELS[score])]
        assert f"AURC {100 * model.scores[score]['aurc']:.2f}%" in label
        expected = plots.rc_curve_points(curve)
        np.testing.assert_array_equal(lines[label].get_xdata(), expected.coverage)
        np.testing.assert_array_equal(lines[label].get_ydata(), expected.risk)
    assert any("error rate" in lab for lab in lines)
    overlay = plots.figure_rc_overlay(pair.models)
    titles = [ax.get_title() for ax in overlay.axes if ax.get_visible()]
    assert titles == [plots.SCORE_LABELS[s] for s in ("msp", "max_logit", "pnorm", "temp")]
    for ax, score in zip(overlay.axes, ("msp", "max_logit", "pnorm", "temp")):
        for line, m in zip(ax.lines, pair.models):
            np.testing.assert_array_equal(line.get_ydata(), plots.rc_curve_points(m.curves[score]).risk)
            assert line.get_label().startswith(m.name)
            assert f"AURC {100 * m.scores[score]['aurc']:.2f}%" in line.get_label()


# ===================================================================== 2. reliability
def test_reliability_bins_give_the_reported_ece(pair):
    model = pair.models[0]
    for score in ("msp", "temp"):
        data = plots.reliability_data(model.confidences[score], model.rows.correct, 15)
        assert data.count.sum() == model.n_eval
        assert data.ece() == pytest.approx(model.scores[score]["ece"], abs=1e-15)
        assert data.overall_accuracy == pytest.approx(model.accuracy)
        full = ~data.empty
        assert np.all(np.isnan(data.accuracy[data.empty])) and np.all(np.isnan(data.confidence[data.empty]))
        assert np.all((data.confidence[full] > data.edges[:-1][full]) | (data.edges[:-1][full] == 0))
        assert np.all(data.confidence[full] <= data.edges[1:][full])


def test_reliability_figure_marks_empty_bins_and_reads_the_ece(pair):
    model = pair.models[1]
    figure = plots.figure_reliability(model, 15)
    diagram = figure.axes[0]
    assert f"ECE {100 * model.scores['msp']['ece']:.2f}%" in diagram.get_title()
    data = plots.reliability_data(np.exp(model.rows.log_msp), model.rows.correct, 15)
    assert data.empty.any()  # MSP >= 1/K leaves the low bins empty
    empty_bars = [c for c in diagram.containers if c.get_label() == "empty bin (no samples)"][0]
    assert len(empty_bars) == int(data.empty.sum())
    accuracy_bars = [c for c in diagram.containers if c.get_label() == "accuracy in the bin"][0]
    np.testing.assert_allclose([b.get_height() for b in accuracy_bars], data.accuracy[~data.empty])


# ============================================================ 3. v_max given the MSP
def brute_force_windows(msp, vmax, correct, width=0.05, step=0.01, min_count=10):
    out = []
    i = 0
    while i * step + width <= 1 + 1e-12:
        lo, hi = round(i * step, 12), round(i * step + width, 12)
        row = []
        for subset in (correct, ~correct):
            v = [vmax[j] for j in range(msp.size)
                 if subset[j] and lo <= msp[j] and (msp[j] < hi or (hi >= 1 and msp[j] <= 1))]
            row.append((np.mean(v), np.std(v)) if len(v) >= min_count else (np.nan, np.nan))
        out.append(row)
        i += 1
    return out


def test_sliding_window_matches_brute_force():
    rng = np.random.default_rng(5)
    msp = np.concatenate([rng.uniform(0.2, 1.0, 700), np.ones(15), [0.95, 0.2]])
    vmax = rng.normal(5, 2, msp.size)
    correct = rng.random(msp.size) < msp
    stats = plots.sliding_window_stats(msp, vmax, correct)
    assert stats.lo.size == 96 and stats.lo[0] == 0 and stats.hi[-1] == 1.0
    np.testing.assert_allclose(stats.hi - stats.lo, 0.05)
    reference = brute_force_windows(msp, vmax, correct)
    for i, ((mc, sc), (mi, si)) in enumerate(reference):
        np.testing.assert_allclose([stats.correct.mean[i], stats.correct.std[i]], [mc, sc], rtol=1e-12)
        np.testing.assert_allclose([stats.incorrect.mean[i], stats.incorrect.std[i]], [mi, si], rtol=1e-12)
    # The 15 rows at MSP exactly 1 are counted (last window closed on the right).
    assert stats.correct.count[-1] + stats.incorrect.count[-1] >= 15


def test_sliding_window_skips_thin_windows():
    msp = np.array([0.5] * 9 + [0.7] * 10)
    stats = plots.sliding_window_stats(msp, np.arange(19.0), np.ones(19, bool))
    at = stats.lo.tolist().index(0.46)
    assert np.isnan(stats.correct.mean[at]) and stats.correct.count[at] == 9
    assert stats.correct.mean[stats.lo.tolist().index(0.66)] == pytest.approx(np.mean(np.arange(9.0, 19.0)))
    assert np.isnan(stats.incorrect.mean).all()


def test_vmax_figure_draws_the_window_means_and_the_ls_ceiling(pair):
    model = pair.models[0]
    figure = plots.figure_vmax_msp(model, ls_alpha=0.1)
    ax = figure.axes[0]
    stats = plots.sliding_window_stats(np.exp(model.rows.log_msp), model.rows.max_logit, model.rows.correct)
    means = {line.get_label(): line for line in ax.lines}
    np.testing.assert_array_equal(means["correct ✓: mean"].get_ydata(), stats.correct.mean)
    np.testing.assert_array_equal(means["incorrect ✗: mean"].get_ydata(), stats.incorrect.mean)
    np.testing.assert_array_equal(means["correct ✓: mean"].get_xdata(), stats.centre)
    np.testing.assert_array_equal(figure.axes[1].lines[1].get_ydata(), stats.incorrect.mean - stats.correct.mean)
    msp = np.exp(model.rows.log_msp)
    c = plots.ls_ceiling_share(msp, 0.1, model.num_classes, model.rows.correct)
    assert c.ceiling == pytest.approx(0.9 + 0.1 / 5)
    (label,) = [lab for lab in means if lab.startswith("LS target ceiling")]
    assert f"{c.ceiling:.3f}" in label and f"{100 * c.share_above:.1f}% of samples" in label
    assert f"{100 * c.error_rate_above:.1f}% of them wrong" in label
    assert c.share_above == pytest.approx(np.mean(msp > c.ceiling))
    assert c.error_rate_above == pytest.approx(np.mean(~model.rows.correct[msp > c.ceiling]))


# ================================================================= 4. the p search
def test_pnorm_search_data_is_the_validation_objective(pair):
    metrics = pair.models[0].scores["pnorm"]
    data = plots.pnorm_search_data(metrics)
    assert data.p.tolist() == list(range(1, 11))
    assert data.objective.tolist() == [metrics["val_objective"][str(p)] for p in range(1, 11)]
    assert data.msp == metrics["val_objective_msp"] and data.chosen_p == metrics["p"]
    figure = plots.figure_pnorm_search(pair.models[0])
    ax = figure.axes[0]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), 100 * data.objective)
    star = [line for line in ax.lines if line.get_marker() == "*"][0]
    assert star.get_xdata().tolist() == [metrics["p"]]
    assert ax.get_ylabel() == "validation AURC (%)"


# ====================================================== 5. errors accepted, by group
def test_errors_at_coverage_by_group_match_brute_force(pair):
    for model in pair.models:
        for score in model.curves:
            values, correct, groups = model.score_values[score], model.rows.correct, model.groups
            for coverage in (0.05, 0.1, 0.5, 1.0):
                got = plots.errors_at_coverage_by_group(model.curves[score], values, correct, groups, coverage)
                # Reference: accept the most confident rows until the coverage is reached, then the rest of
                # the last tie group.
                order = np.argsort(-values, kind="stable")
                k = math.ceil(coverage * values.size - 1e-9)
                k = int(np.count_nonzero(values >= values[order[k - 1]]))
                accepted = order[:k]
                assert got.accepted == k and got.coverage == pytest.approx(k / values.size)
                assert got.errors == int(np.count_nonzero(~correct[accepted]))
                for g in ("clean", "shifted"):
                    assert got.groups[g] == int(np.count_nonzero(~correct[accepted] & (groups[accepted] == g)))
                assert sum(got.groups.values()) == got.errors


def test_errors_by_group_figure_stacks_the_counts(pair):
    figure = plots.figure_errors_by_group(pair.models, 0.1)
    ax = figure.axes[0]
    totals = np.zeros(2)
    for container in ax.containers:
        totals += [bar.get_height() for bar in container]
    expected = [plots.errors_at_coverage_by_group(m.curves["msp"], m.score_values["msp"], m.rows.correct,
                                                  m.groups, 0.1).errors for m in pair.models]
    assert totals.tolist() == expected
    assert [t.get_text() for t in ax.get_xticklabels()] == ["alpha0", "alpha0.1"]


# =================================================================== 6. the files
def png_size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        image.load()  # decodes every pixel
        return image.size


@pytest.mark.slow
def test_png_figures_are_palette_images_matplotlibs_pixels_kept_within_a_few_levels(pair):
    # PNGs are written as 256-colour palette images (a third of the bytes): every pixel within 16 of
    # 255 of what matplotlib draws, the white background exactly.
    import io

    from PIL import Image

    from selcal.figures import base

    matplotlib, _, _ = base.mpl()
    for job in plots.plan_figures(pair)[:4]:
        with matplotlib.rc_context(base.style()):
            chosen = [pair.models[i] for i in job.models]
            figure = job.draw(chosen if job.many else chosen[0], **job.options)
            base.fit(figure)
            raw = io.BytesIO()
            figure.savefig(raw, format="rgba", dpi=figure.dpi)
            width, height = figure.canvas.get_width_height(physical=True)
            png = base.render(figure, "png")
        drawn = np.frombuffer(raw.getvalue(), np.uint8).reshape(height, width, 4)[..., :3].astype(int)
        with Image.open(io.BytesIO(png)) as image:
            assert image.mode == "P" and len(image.getcolors(256)) <= 256, job.stem
            assert image.size == (width, height)
            got = np.asarray(image.convert("RGB")).astype(int)
        assert np.abs(got - drawn).max() <= 16, job.stem
        white = (drawn == 255).all(axis=-1)
        assert white.any() and (got[white] == 255).all(), job.stem  # the background stays white


@pytest.mark.slow
def test_write_plots_png_every_figure_decodes(pair, tmp_path):
    out = tmp_path / "figs"
    written = plots.write_plots(pair, out, "png", ls_alpha=[0.0, 0.1])
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(f.path.name for f in written)
    expected = {"overlay_rc.png", "overlay_vmax_msp.png", "errors_by_group.png"}
    for model in ("alpha0", "alpha0.1"):
        expected |= {f"{model}_{kind}.png" for kind in plots.FIGURE_KINDS}
    assert set(names) == expected
    for path in out.iterdir():
        width, height = png_size(path)
        assert 700 <= width <= 2600 and 500 <= height <= 2600, (path.name, width, height)
        assert oct(path.stat().st_mode & 0o777) != "0o600"  # readable like any other file the user writes
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


@pytest.mark.slow
def test_svg_and_pdf(tmp_path):
    model = selcal.evaluate_arrays(*synthetic(800)[:2], options=selcal.Options(scores=("msp", "max_logit")))
    result = selcal.EvaluationResult(models=[model], options=selcal.Options(scores=("msp", "max_logit")))
    svg = plots.write_plots(result, tmp_path / "svg", "svg")
    assert {f.kind for f in svg} == {"rc", "reliability", "smooth", "vmax_msp"}
    for f in svg:
        root = ET.parse(f.path).getroot()
        assert root.tag.endswith("svg") and float(root.get("width").rstrip("pt")) > 300
    pdf = plots.write_plots(result, tmp_path / "pdf", "pdf")
    for f in pdf:
        data = f.path.read_bytes()
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")


@pytest.mark.slow
def test_rendering_leaves_no_global_state(pair):
    import matplotlib

    before = dict(matplotlib.rcParams)
    backend = matplotlib.get_backend() if "matplotlib.pyplot" in sys.modules else None
    figures = list(plots.render_figures(pair, "png"))
    assert len(figures) == 13 and all(f.data.startswith(b"\x89PNG") for f in figures)
    assert dict(matplotlib.rcParams) == before
    if "matplotlib.pyplot" in sys.modules:
        import matplotlib.pyplot as plt

        assert plt.get_fignums() == [] and matplotlib.get_backend() == backend
    del figures
    gc.collect()
    from matplotlib.figure import Figure

    assert not [o for o in gc.get_objects() if isinstance(o, Figure)]


@pytest.mark.slow
def test_model_names_become_safe_unique_file_names(tmp_path):
    a = model_result(n=300, name="runs/a b", groups=False)
    b = model_result(n=300, name="runs/a:b", groups=False)
    result = selcal.EvaluationResult(models=[a, b], options=selcal.Options(scores=("msp",)))
    for m in result.models:
        for s in ("max_logit", "pnorm", "temp"):
            m.scores.pop(s), m.curves.pop(s), m.score_values.pop(s)
    written = plots.write_plots(result, tmp_path, "png")
    stems = [f.stem for f in written]
    assert len(set(stems)) == len(stems)
    assert "runs_a_b_rc" in stems and "runs_a_b_rc-2" in stems
    assert all("/" not in s and ":" not in s and " " not in s for s in stems)


# ======================================================================= 7. CLI
@pytest.mark.slow
def test_cli_plots_and_report(tmp_path):
    logits, labels, groups = synthetic(2400)
    split = np.where(np.arange(labels.size) < 600, "val", "test")
    path = write_dump(tmp_path / "m.parquet", logits, labels, groups=groups, split=split)
    out = tmp_path / "figs"
    result = CliRunner().invoke(app, ["evaluate", str(path), "--plots", str(out), "--plot-format", "svg",
                                      "--group-col", "source", "--ls-alpha", "0.1", "--at-coverage", "0.2",
                                      "--report", str(out / "report.html"), "-q"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    kinds = {p.name for p in out.iterdir()}
    assert {"m_rc.svg", "m_reliability.svg", "m_smooth.svg", "m_vmax_msp.svg", "m_pnorm_search.svg",
            "errors_by_group.svg", "m_logit_profile.svg", "m_pnorm_vmax.svg", "report.html"} == kinds
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count("data:image/svg+xml;base64,") == 8 and "at_coverage" in page


@pytest.mark.parametrize("args, message", [
    (["--plot-format", "jpg"], "--plot-format must be png, svg or pdf"),
    (["--at-coverage", "0"], "--at-coverage must be a fraction"),
    (["--ls-alpha", "0.1,0.2"], "--ls-alpha takes one value or one per TEST file"),
    (["--ls-alpha", "1.5"], "--ls-alpha must be in [0, 1)"),
])
def test_cli_refuses_bad_plot_options_before_any_work(tmp_path, args, message):
    logits, labels, _ = synthetic(300)
    path = write_dump(tmp_path / "m.parquet", logits, labels)
    out = tmp_path / "figs"
    result = CliRunner().invoke(app, ["evaluate", str(path), "--plots", str(out), *args])
    assert result.exit_code == 2 and message in result.stderr
    assert not out.exists()


def test_cli_plots_folder_that_is_a_file(tmp_path):
    logits, labels, _ = synthetic(300)
    path = write_dump(tmp_path / "m.parquet", logits, labels)
    result = CliRunner().invoke(app, ["evaluate", str(path), "--plots", str(path)])
    assert result.exit_code == 2 and "--plots takes a folder" in result.stderr


@pytest.mark.slow
def test_evaluate_without_plots_does_not_import_matplotlib(tmp_path):
    logits, labels, _ = synthetic(300)
    path = write_dump(tmp_path / "m.parquet", logits, labels)
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom selcal.cli import app\n"
        f"r = CliRunner().invoke(app, ['evaluate', {str(path)!r}, '--json', {str(tmp_path / 'r.json')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ==================================================================== 8. the LS pair
@pytest.mark.skipif(not all(p.exists() for p in LS_PAIR), reason="LS pair not in sample_logits/")
def test_ls_pair_dumps_follow_the_sample_layout():
    total = 0
    for path, alpha in zip(LS_PAIR, ("0", "0.1")):
        table = pq.read_table(path)
        assert table.schema.names[:4] == ["id", "split", "label", "logits"]
        assert table.schema.field("logits").type == pa.list_(pa.float32(), 10)
        metadata = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
        assert {"selcal.source", "selcal.model", "selcal.dataset", "selcal.licence"} <= set(metadata)
        assert metadata["selcal.label_smoothing"] == alpha
        assert set(table.column("source").to_pylist()) == {"clean", "shifted"}
        total += path.stat().st_size
    assert total < 2 * 1024 * 1024
    a, b = (pq.read_table(p) for p in LS_PAIR)
    assert a.column("label").equals(b.column("label")) and a.column("id").equals(b.column("id"))
