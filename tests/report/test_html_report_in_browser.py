"""The HTML report in a real browser: headless Chromium at 800 and 1400 px wide.

A copy of the report gets a script that, once the page has loaded, writes into the DOM
the page's scroll width, the viewport width, how many images loaded (``complete`` with a
natural width) and the scale each image is shown at; Chromium's ``--dump-dom`` returns
that DOM. Asserted: no horizontal scrolling of the page, every figure loaded, no
figure shown below ``MIN_FIGURE_SCALE`` of its pixel width (legible), every table whole at
1400 px (the calibrators' summary too), and model names in the summary tables broken over
lines at their natural points (after ``/ _ - .``) before anywhere else (the script records
where each line of a name starts, from the boxes of its characters).

Skipped when no Chromium is installed, except under ``SELCAL_REQUIRE_CHROMIUM=1``
(``.ci/run`` installs Debian's ``chromium`` and sets it), where a missing browser fails.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import browser, run_browser

import selcal
from selcal.report import html as html_report

MEASURE = """<script>
// Once loaded: scroll through the page (figures load lazily, as they come near the window),
// wait until every image is decoded, then write the measures into the DOM.
window.addEventListener("load", function () {
  var y = 0;
  function measure() {
    var images = Array.prototype.slice.call(document.images);
    var boxes = Array.prototype.slice.call(document.querySelectorAll(".scroll"));
    // where each line of a model name in the summary tables starts (the characters' boxes)
    var names = Array.prototype.slice.call(document.querySelectorAll(
      "table.summary td:first-child a, table.calibrators-best td:first-child a")).map(function (a) {
      var text = "", starts = [], top = null;
      var walker = document.createTreeWalker(a, NodeFilter.SHOW_TEXT);
      for (var node = walker.nextNode(); node; node = walker.nextNode()) {
        for (var i = 0; i < node.length; i++) {
          var range = document.createRange();
          range.setStart(node, i); range.setEnd(node, i + 1);
          var rects = range.getClientRects();
          if (rects.length && rects[0].width > 0) {
            if (top === null || rects[0].top > top + 2) { starts.push(text.length); top = rects[0].top; }
          }
          text += node.data[i];
        }
      }
      return {table: a.closest("table").className, text: text, starts: starts};
    });
    var out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, names: names,
               images: images.length,
               loaded: images.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
               scales: images.map(function (i) { return i.getBoundingClientRect().width / i.naturalWidth; }),
               tables: boxes.map(function (b) {
                 return {cls: b.firstElementChild.className, scrollWidth: b.scrollWidth, clientWidth: b.clientWidth,
                         overflow: getComputedStyle(b).overflowX}; })};
    var pre = document.createElement("pre");
    pre.id = "measure";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  function step() {
    window.scrollTo(0, y);
    y += window.innerHeight / 2;
    if (y < document.documentElement.scrollHeight + window.innerHeight) { setTimeout(step, 50); return; }
    var waited = 0;
    (function wait() {
      var pending = Array.prototype.slice.call(document.images).filter(function (i) { return !i.complete; });
      if (pending.length && waited++ < 200) { setTimeout(wait, 50); return; }
      window.scrollTo(0, 0);
      measure();
    })();
  }
  step();
});
</script>"""


# every figure kind but pnorm_search; a post-hoc calibrator: each model's calibrators table and the summary's
OPTIONS = selcal.Options(scores=("msp", "max_logit", "temp", "vector"), bins=12)
NATURAL = "/_-."  # a long name breaks after these first
# long names with no space: one of parts between natural points, one with a part wider than its box
NAMES = ("resnet50_" * 14 + "baseline", "vit_" * 20 + "ls0.1-" + "z" * 40)


def hostile_result():
    """Two models with long unbreakable names and paths, groups, every score: the widest page."""
    models = []
    for seed, name in zip((1, 2), NAMES):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 6, size=1500)
        logits = rng.normal(size=(1500, 6))
        logits[np.arange(1500), labels] += 2.0
        groups = np.where(rng.random(1500) < 0.3, "sketch_" * 10, "photo")
        models.append(selcal.evaluate_arrays(logits[300:], labels[300:], logits[:300], labels[:300], name=name,
                                             path="/data/" + "very_long_directory_name/" * 12 + name + ".parquet",
                                             split="holdout", groups=groups[300:], options=OPTIONS))
    return selcal.EvaluationResult(models=models, options=OPTIONS)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    path = html_report.write_report(hostile_result(), folder / "report.html", ls_alpha=[0.0, 0.1])
    text = path.read_text(encoding="utf-8")
    measured = folder / "measured.html"
    measured.write_text(text.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    return measured, len(re.findall(r"<img ", text))


@pytest.mark.slow
@pytest.mark.parametrize("width", [800, 1400])
def test_report_fits_the_window_and_every_figure_loads(report, width):
    """At 1400 px every table is whole; at 800 px a table wider than the window scrolls inside
    its own box (overflow-x auto: nothing is cut), never the page."""
    executable = browser()
    page, n_images = report
    dom = run_browser(executable, page, width, "--dump-dom")
    match = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S)
    assert match, dom[-2000:]
    measure = json.loads(match.group(1).replace("&quot;", '"'))
    assert measure["innerWidth"] == width
    assert measure["scrollWidth"] <= measure["innerWidth"], measure  # no sideways scrolling of the page
    # overlays, errors by group; rc, reliability and smooth per model (its vmax_msp is a tile of overlay_vmax_msp)
    assert measure["images"] == n_images and n_images == 3 + 2 * 3
    assert measure["loaded"] == n_images  # every figure decoded once scrolled to (loading=lazy)
    assert min(measure["scales"]) >= html_report.MIN_FIGURE_SCALE - 0.01, measure["scales"]
    tables = measure["tables"]
    assert {"summary", "calibrators-best", "calibrators", "metrics", "groups", "settings"} <= {t["cls"] for t in tables}
    for table in tables:
        assert table["overflow"] == "auto", table  # a wider table scrolls inside its box
        if width >= 1400:
            assert table["scrollWidth"] <= table["clientWidth"], table  # whole: no clipped or scrolled column


@pytest.mark.slow
def test_screenshots_when_asked(report, tmp_path):
    """SELCAL_SCREENSHOTS=DIR: writes report-800.png and report-1400.png into DIR, to be looked at."""
    folder = os.environ.get("SELCAL_SCREENSHOTS")
    if not folder:
        pytest.skip("set SELCAL_SCREENSHOTS=DIR to write screenshots")
    executable = browser()
    page, _ = report
    for width in (800, 1400):
        shot = Path(folder) / f"report-{width}.png"
        run_browser(executable, page, width, f"--screenshot={shot}")
        assert shot.stat().st_size > 0


@pytest.mark.slow
def test_names_break_at_their_natural_points_first(report):
    """At 800 px the summary's first column is narrow: a long model name breaks after ``/ _ - .``
    (``<wbr>``), and inside a part only when no natural point is on that line (the part alone is
    wider than the box). Before: broken anywhere, mid-word (``resnet50_re|snet50``)."""
    executable = browser()
    page, _ = report
    dom = run_browser(executable, page, 800, "--dump-dom")
    measure = json.loads(re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    names = measure["names"]
    assert {n["table"] for n in names} == {"summary", "calibrators-best"} and len(names) == 2 * len(NAMES)
    anywhere = 0
    for name in names:
        text, starts = name["text"], name["starts"]
        assert text in NAMES and starts[0] == 0, name
        assert len(starts) > 2, name  # wrapped: the test tests something
        ends = starts[1:] + [len(text)]
        for start, end in zip(starts, ends):
            if end == len(text) or text[end - 1] in NATURAL:
                continue  # the line ends at a natural point
            anywhere += 1  # broken inside a part: only when the line held no natural point to break at
            assert not any(text[i - 1] in NATURAL for i in range(start + 1, end)), (text[start:end], name)
    assert anywhere  # the 40 z's are wider than the column: broken anywhere there, and only there
