"""``--report FILE.html``: one self-contained page with the tables, the figures and the settings.

Self-contained means the page loads nothing: every figure is a ``data:`` URI that decodes
to the image, and there is no external ``src``/``href``. The numbers on the page are the
result's numbers, formatted as in the terminal table.
"""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from helpers import calibrated_result

import selcal
from selcal import figures as plots
from selcal.report import html as html_report

VOID = {"meta", "img", "br", "hr", "link", "input", "wbr"}


class Page(HTMLParser):
    """Collects tags, checks that every non-void tag is closed in order, keeps the images."""

    def __init__(self):
        super().__init__()
        self.stack, self.images, self.links, self.text, self.errors = [], [], [], [], []
        self.glue = False  # after a <wbr> (a break opportunity, no text): the text goes on

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs)
        for key in ("src", "href"):
            if key in attrs and tag != "img":
                self.links.append(attrs[key])
        if tag not in VOID:
            self.stack.append(tag)
        self.glue = tag == "wbr"

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]} ")
        else:
            self.stack.pop()

    def handle_data(self, data):
        if self.glue and self.text:
            self.text[-1] += data
        else:
            self.text.append(data)
        self.glue = False


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    assert not page.errors and page.stack == [], (page.errors, page.stack)
    return page


def make_model(seed: int, name: str, n: int = 1200, groups: bool = True):
    rng = np.random.default_rng(seed)
    k = 4
    labels = rng.integers(0, k, size=n + 400)
    logits = rng.normal(size=(n + 400, k))
    logits[np.arange(n + 400), labels] += 1.8
    group = np.where(rng.random(n + 400) < 0.3, "sketch", "photo")
    return selcal.evaluate_arrays(logits[400:], labels[400:], logits[:400], labels[:400], name=name,
                                  path=f"/data/{name}.parquet", split="split-column",
                                  groups=group[400:] if groups else None)


@pytest.fixture(scope="module")
def result():
    return selcal.EvaluationResult(models=[make_model(1, "ce <baseline>"), make_model(2, "ls&0.1")],
                                   options=selcal.Options(bins=12))


@pytest.fixture(scope="module")
def page_text(result, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    html_report.write_report(result, path, ls_alpha=[0.0, 0.1], at_coverage=0.2)
    assert not [p for p in path.parent.iterdir() if p.name != "report.html"]  # no temporary file left
    return path.read_text(encoding="utf-8")


@pytest.mark.slow
def test_page_is_well_formed_and_loads_nothing(page_text):
    page = parse(page_text)
    assert page_text.startswith("<!DOCTYPE html>") and "<meta charset='utf-8'>" in page_text
    assert page.links == [] or all(link.startswith("#") for link in page.links)
    assert not re.search(r"(src|href)\s*=\s*['\"](https?:|//|file:)", page_text)
    assert page.images
    for image in page.images:
        assert image["src"].startswith("data:image/png;base64,")
        data = base64.b64decode(image["src"].split(",", 1)[1], validate=True)
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert image.get("alt")


@pytest.mark.slow
def test_page_has_every_figure_once(result, page_text):
    page = parse(page_text)
    # overlays and errors by group, then each model's figures but its vmax_msp, a tile of overlay_vmax_msp
    expected = 3 + len(result.models) * (len(plots.FIGURE_KINDS) - 1)
    assert len(page.images) == expected
    sources = [image["src"] for image in page.images]
    assert len(set(sources)) == len(sources)  # no image embedded twice
    assert "<figure class='wide' id='figure-overlay_vmax_msp'>" in page_text or \
        "<figure id='figure-overlay_vmax_msp'>" in page_text
    assert page.links.count("#figure-overlay_vmax_msp") == len(result.models)  # each model's vmax_msp is there
    for model in result.models:
        section = page_text[page_text.index(f"id='{html_report._anchor(model.name)}'"):]
        section = section[:section.find("<h2", 1)]
        assert "href='#figure-overlay_vmax_msp'" in section and f"alt='vmax_msp {html_report._e(model.name)}'" not in section
        assert f"alt='rc {html_report._e(model.name)}'" in section


@pytest.mark.slow
def test_page_shows_the_result_numbers(result, page_text):
    text = " ".join(parse(page_text).text)
    for model in result.models:
        assert model.name in text  # escaped in the source, readable on the page
        for score in ("msp", "max_logit", "pnorm", "temp"):
            assert f"{100 * model.scores[score]['aurc']:.2f}" in text
            assert f"{100 * model.scores[score]['augrc']:.2f}" in text
        assert f"{100 * model.scores['temp']['ece']:.2f}" in text
        assert f"T = {model.scores['temp']['temperature']:.4f}" in text
        assert f"p = {model.scores['pnorm']['p']}" in text
        for group, values in model.extra["groups"].items():
            assert group in text and f"{100 * values['scores']['msp']['aurc']:.2f}" in text
    assert "<baseline>" not in page_text and "&lt;baseline&gt;" in page_text


@pytest.mark.slow
def test_page_lists_the_settings(page_text):
    text = " ".join(parse(page_text).text)
    settings = text[text.index("Settings"):]
    for key, value in (("bins", "12"), ("p_grid", "1, 2, 3"), ("aurc_estimator", "mean"),
                       ("at_coverage", "0.2"), ("ls_alpha", "[0.0, 0.1]"), ("selcal", selcal.__version__)):
        assert key in settings and value in settings, key


@pytest.mark.slow
def test_report_reuses_svg_figures(result, tmp_path):
    small = selcal.EvaluationResult(models=[result.models[0]], options=result.options)
    figures = list(plots.render_figures(small, "svg"))
    path = html_report.write_report(small, tmp_path / "r.html", figures)
    text = Path(path).read_text(encoding="utf-8")
    images = parse(text).images
    assert len(images) == len(figures) and all(i["src"].startswith("data:image/svg+xml;base64,") for i in images)
    assert base64.b64decode(images[0]["src"].split(",", 1)[1]).lstrip().startswith(b"<?xml")


def test_names_in_the_report_break_at_natural_points_after_escaping():
    from selcal.escape import html_name
    from selcal.report import html as html_report

    assert html_name("a/b_c-d.e") == "a/<wbr>b_<wbr>c-<wbr>d.<wbr>e"
    assert html_name("x<wbr>&y") == "x&lt;wbr&gt;&amp;y"  # a name's own markup stays text
    assert html_name("é\x1b_") == "é\\x1b_"  # escapes first; nothing after the last character
    page = html_report.render_report(calibrated_result(["runs/resnet50_ls-0.1.seed0", "b"]), [])
    wanted = "runs/<wbr>resnet50_<wbr>ls-<wbr>0.<wbr>1.<wbr>seed0"
    summary = page[page.index("<table class='summary'>"):]
    assert f">{wanted}</a></td>" in summary[:summary.index("</table>")]  # the summary (before: no <wbr>)
    assert f"<h2 id='model-runs-resnet50-ls-0-1-seed0'>{wanted}</h2>" in page
