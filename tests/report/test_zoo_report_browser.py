"""A zoo's HTML report in a real browser (issue 34): a synthetic zoo of the realdata shape (55
test-only dumps of 10 000 rows (8 000 evaluated), 20 with K = 100 and 35 with K = 10, 14 of them log-probabilities).

Asserted in headless Chromium at 1400 x 1000: the first screen holds the title, one line per kind of
warning and the summary (a table per board, K = 100 and K = 10: the first's header and first rows);
clicking a column's header sorts the rows of its table by it (and again the other way); the page stays under 8 MB and draws only the figures it shows (the
best ``--top`` models of each board and the baseline, every other model's section folded, with no figure; the
figures across models once per board, under its heading)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from helpers import browser, run_browser

import selcal
from selcal.report.html import write_report

SIZE_BOUND = 8_000_000
TOP = 8

MEASURE = """<script>
window.addEventListener("load", function () {
  function names() {
    return Array.prototype.slice.call(document.querySelector("table.summary").tBodies[0].rows).map(function (row) {
      return [row.cells[0].textContent, row.cells[4].getAttribute("data-v")]; });
  }
  var table = document.querySelector("table.summary"), box = table.getBoundingClientRect();
  var rows = table.tBodies[0].rows, third = rows[2].getBoundingClientRect();
  var warnings = Array.prototype.slice.call(document.querySelectorAll("section.warnings li")).map(function (li) {
    return li.getBoundingClientRect().height; });
  var before = names();
  var header = table.querySelectorAll("thead th")[4];  // accuracy
  header.click();
  var first = names();
  header.click();
  var second = names();
  var out = {innerHeight: window.innerHeight, tableTop: box.top, thirdRowBottom: third.bottom,
             warningHeights: warnings, before: before, first: first, second: second,
             sort: header.getAttribute("aria-sort"),
             folded: document.querySelectorAll("details.model").length,
             images: document.images.length};
  var pre = document.createElement("pre"); pre.id = "measure"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def synthetic_zoo():
    models = []
    rng = np.random.default_rng(0)
    options = selcal.Options()
    n = 10_000
    test_labels = {k: rng.integers(0, k, n) for k in (100, 10)}  # one test set per data set, as CIFAR-10/100
    for i in range(55):
        k = 100 if i < 20 else 10
        labels = test_labels[k]
        logits = rng.normal(0.0, 1.0, (n, k)).astype(np.float32)
        logits[np.arange(n), labels] += rng.gamma(2.0, 1.5 + 0.02 * i, n).astype(np.float32)
        if i >= 41:  # the calpaper kind: saved log-probabilities
            logits = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        name = (f"wasscal_cifar100_m{i:02d}" if k == 100 else
                f"wasscal_cifar10_m{i:02d}" if i < 41 else f"calpaper_cifar10_m{i:02d}") + "/test"
        models.append(selcal.evaluate_arrays(logits, labels, name=name, options=options))
    return selcal.EvaluationResult(models=models, options=options)


@pytest.fixture(scope="module")
def zoo_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    result = synthetic_zoo()
    baseline = result.models[-1].name  # the last of the board, drawn anyway
    from selcal.checks.common_ground import board_warning

    path = write_report(result, folder / "zoo.html", top=TOP, baselines=[baseline], workers=2,
                        board_warnings=[board_warning(result.models)])  # (as evaluate does)
    return result, path, baseline


@pytest.mark.slow
def test_a_zoo_report_stays_small_and_draws_only_what_it_shows(zoo_report):
    result, path, baseline = zoo_report
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < SIZE_BOUND, path.stat().st_size
    drawn = set(re.findall(r"<tr class='drawn'><td><a href='#(model-[^']+)'", text))
    assert len(drawn) == 2 * TOP + 1 and "model-" + "".join(c if c.isalnum() else "-" for c in baseline) in drawn
    assert text.count("<details class='model'>") == 55 - 2 * TOP - 1
    figures = re.findall(r"<figure[^>]*id='figure-([^']+)'", text)
    own = [f for f in figures if not f.startswith(("overlay", "errors_by_group", "sweep"))]
    stems = {m.name.replace("/", "_") for m in result.models if "model-" + "".join(
        c if c.isalnum() else "-" for c in m.name) in drawn}
    assert own and all(any(f.startswith(stem + "_") for stem in stems) for f in own)  # the drawn models' only
    assert len(own) <= 4 * (2 * TOP + 1)  # rc, reliability, smooth, pnorm_search of each model drawn, no more
    # the figures across models: a board's under its heading, its best 8 (and the baseline, of K = 10)
    across = text.split("<h2 id='across-models'>", 1)[1]
    k100, k10 = across.index("<h3 id='across-k100'>K = 100: 20 models"), across.index("<h3 id='across-k10'>K = 10: 35")
    assert k100 < across.index("id='figure-overlay_rc_k100'") < k10 < across.index("id='figure-overlay_rc_k10'")
    assert "Drawn: the 8 best models of its board; the other 12 are in the summary" in across[k100:k10]
    assert "Drawn: the 8 best models of its board and the baseline" in across[k10:]
    # warnings: one line per kind, with its count
    warnings = text.split("<section class='warnings'>", 1)[1].split("</section>", 1)[0]
    assert warnings.count("the logits look like log-probabilities (logsumexp") == 1  # one line for the 14 models
    assert "<span class='count'>14</span> the logits look like" in warnings
    # not the same rows: no warning, a summary table per board (K = 100, K = 10), each under its heading
    assert "not evaluated on the same rows" not in warnings
    summary = text.split("id='summary'", 1)[1]
    assert summary.count("<table class='summary'>") == 2 and "split into 2 boards" in summary
    assert summary.index("K = 100: 20 models on the same 8,000 rows") < summary.index(
        "K = 10: 35 models on the same 8,000 rows")


@pytest.mark.slow
def test_the_first_screen_holds_the_summary_and_a_click_sorts(zoo_report, tmp_path):
    executable = browser()
    _, path, _ = zoo_report
    page = tmp_path / "measured.html"
    page.write_text(path.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = run_browser(executable, page, 1400, "--dump-dom")
    measure = json.loads(re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    assert measure["innerHeight"] >= 900
    assert measure["tableTop"] < measure["innerHeight"] / 2, measure  # the summary starts in the first half
    assert measure["thirdRowBottom"] <= measure["innerHeight"], measure  # and its first rows are on screen
    assert max(measure["warningHeights"]) < 40, measure["warningHeights"]  # one line per kind
    accuracy = [float(v) for _, v in measure["first"]]
    assert accuracy == sorted(accuracy, reverse=True) and measure["first"] != measure["before"]
    again = [float(v) for _, v in measure["second"]]
    assert again == sorted(again) and measure["sort"] == "ascending"
    assert measure["folded"] == 55 - 2 * TOP - 1
