"""The figures across models of a zoo that mixes data sets: drawn once per board (the models
evaluated on the same rows), each with that board's best ``--top`` models and the baselines that
belong to it, captioned with the board's heading, its label in the file name (``overlay_rc_k4``)
and, in the report, under the board's heading; a zoo of one board is drawn as before."""

from __future__ import annotations

import re

from helpers import mixed_zoo

import selcal
from selcal.figures.render import ZooBoard, plan_figures, render_figures
from selcal.report import leaderboard
from selcal.report.html import drawn_of, render_report, zoo_boards, zoo_selection

HEADINGS = {"K = 4": "K = 4: 3 models on the same 240 rows", "K = 6": "K = 6: 3 models on the same 240 rows"}


def mixed(dumps):
    result = selcal.evaluate(mixed_zoo(dumps))  # three models with K = 4, three with K = 6, interleaved
    return result, [row["model"] for row in leaderboard(result, "accuracy")]


def best(result, order, k, top):
    return [n for n in order if n in {m.name for m in result.models if m.num_classes == k}][:top]


def test_each_board_draws_its_own_best_models_in_its_own_figures(dumps):
    result, order = mixed(dumps)
    names = [m.name for m in result.models]
    baseline = next(n for n in reversed(order) if n.startswith("k6_"))  # the last of the K = 6 board
    made = zoo_boards(result, order, 1, [baseline])
    assert [(b.label, b.heading) for b in made] == list(HEADINGS.items())
    assert [names[i] for i in made[0].indices] == best(result, order, 4, 1)  # the baseline is not K = 4's
    assert sorted(names[i] for i in made[1].indices) == sorted(best(result, order, 6, 1) + [baseline])
    assert made[0].note == "Drawn: the 1 best models of its board; the other 2 are in the summary (--top K draws more)."
    notes: list[str] = []
    jobs = plan_figures(result, boards=made, per_model=drawn_of(made, 6)[0], notes=notes)
    across = [job for job in jobs if job.model is None]
    assert {job.board for job in across} == {"K = 4", "K = 6"}
    for board, k in (made[0], 4), (made[1], 6):
        own = [job for job in across if job.board == board.label]
        assert own and all(job.caption.startswith(board.heading + ". ") for job in own)
        assert all(job.stem.endswith(f"_k{k}") for job in own), [job.stem for job in own]
        for job in own:  # only this board's drawn models, none of the other board's
            assert sorted(names[i] for i in job.models) == sorted(names[i] for i in board.indices)
    # the figures drawn hold those models (RenderedFigure.models), each named by its board
    drawn = [f for f in render_figures(result, "svg", kinds={"rc"}, boards=made, per_model=[]) if f.model is None]
    assert [(f.stem, f.board) for f in drawn] == [("overlay_rc_k4", "K = 4"), ("overlay_rc_k6", "K = 6")]
    assert list(drawn[0].models) == best(result, order, 4, 1)
    assert sorted(drawn[1].models) == sorted(best(result, order, 6, 1) + [baseline])


def test_a_small_mixed_zoo_is_drawn_board_by_board_too(dumps):
    result, order = mixed(dumps)
    made = zoo_boards(result, order, 8)
    assert all(b.whole and len(b.indices) == 3 and not b.note for b in made) and drawn_of(made, 6) == (None, "")
    jobs = [job for job in plan_figures(result, boards=made) if job.kind == "overlay_rc"]
    assert [job.caption for job in jobs] == [f"{h}. Risk–coverage of every model, one panel per score."
                                             for h in HEADINGS.values()]


def test_one_board_is_planned_as_before(dumps):
    result, order = mixed(dumps)
    one = selcal.EvaluationResult(models=[m for m in result.models if m.num_classes == 4] * 1, options=result.options)
    one_order = [n for n in order if n.startswith("k4_")]
    for top in (1, 8):
        made = zoo_boards(one, one_order, top)
        indices, note = zoo_selection(one, one_order, top)
        assert made == [ZooBoard("", "", indices, note)] and drawn_of(made, 3) == (indices, note)
        plain = plan_figures(one, overview=indices, per_model=indices, overview_note=note)
        boarded = plan_figures(one, overview=indices, per_model=indices, overview_note=note, boards=made)
        assert [(j.stem, j.caption, j.models, j.board) for j in boarded] == \
            [(j.stem, j.caption, j.models, "") for j in plain]


def test_the_cli_writes_a_figure_per_board_and_the_report_shows_it_under_the_board(cli, dumps, tmp_path):
    plots, report = tmp_path / "plots", tmp_path / "report.html"
    result = cli("evaluate", *mixed_zoo(dumps), "--plots", plots, "--report", report, "--top", "2", "--figures", "rc",
                 "--sort-by", "accuracy")
    assert result.exit_code == 0, result.stderr
    across = sorted(p.name for p in plots.iterdir() if p.name.startswith("overlay"))
    assert across == ["overlay_rc_k4.png", "overlay_rc_k6.png"]
    page = report.read_text(encoding="utf-8")
    section = page[page.index("<h2 id='across-models'>"):]
    first, second = section.index(f"<h3 id='across-k4'>{HEADINGS['K = 4']}</h3>"), \
        section.index(f"<h3 id='across-k6'>{HEADINGS['K = 6']}</h3>")
    assert first < section.index("id='figure-overlay_rc_k4'") < second < section.index("id='figure-overlay_rc_k6'")
    captions = re.findall(r"<figcaption>([^<]*)</figcaption>", section)
    assert captions[0].startswith(HEADINGS["K = 4"] + ". Risk–coverage, one panel per score. Drawn: the 2 best")
    assert section.count("1 models not drawn (in its summary table, in its order)") == 2
    summary = page[page.index("id='summary'"):page.index("<h2 id='across-models'>")]
    assert "<a href='#across-k4'>its figures across models</a>" in summary
    assert "<a href='#across-k6'>its figures across models</a>" in summary
    drawn = re.findall(r"<tr class='drawn'><td><a href='#model-(k\d)", summary)
    assert sorted(drawn) == ["k4", "k4", "k6", "k6"]  # each board's best two


def test_one_board_report_has_no_board_figures(dumps):
    result, _ = mixed(dumps)
    one = selcal.EvaluationResult(models=[m for m in result.models if m.num_classes == 6], options=result.options)
    figures = list(render_figures(one, "svg", kinds={"rc"}, per_model=[]))
    assert [(f.stem, f.board) for f in figures] == [("overlay_rc", "")]
    page = render_report(one, figures)
    assert "<h2 id='across-models'>Across models</h2><div class='figures'>" in page and "<h3 id='across" not in page
