"""Shared helpers."""

from __future__ import annotations

from helpers import calibrated_result


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
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/<wbr>script&gt;" in table  # (the page's own sorting script is not the name's)
    rows = re.findall(r"<tr><td><a href='#([^']*)'>(.*?)</a></td>(.*?)</tr>", table)
    assert len(rows) == len(names)
    tally = {}
    by_anchor = {html_report._anchor(m.name) + "-calibrators": m for m in result.models}
    for href, shown, cells in rows:  # in the leaderboard's order
        model = by_anchor[href]
        assert f"id='{href}'" in page
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
