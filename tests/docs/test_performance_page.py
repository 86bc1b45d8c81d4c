"""The performance page lists every benchmark under bench/ with the command that runs it, and keeps
the measurement history in one place (the changelog), linked from the page, not copied."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_benchmark_is_on_the_performance_page_with_how_to_run_it():
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        assert f"\n- `python bench/{script.name}" in page, f"docs/performance.md does not say how to run {script.name}"
    assert "bench/make_dumps.py" in page


def test_the_history_is_in_the_changelog_once_and_linked_from_the_performance_page():
    heading = "## History: the first two rounds"
    changelog = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    assert changelog.count(heading) == 1
    assert "(changelog.md#history-the-first-two-rounds)" in (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "History: the first two rounds" not in (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
