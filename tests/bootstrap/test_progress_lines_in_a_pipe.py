"""Progress of long work in a pipe or a CI log (issue 34): a plain line on stderr at most every 10 s
(models done, resamples done), never a bar's control characters; ``-q`` silences it."""

from __future__ import annotations

import pytest

from helpers import make_data

from selcal.cli import progress


def test_a_line_at_most_every_ten_seconds_and_none_for_short_work():
    now = [0.0]
    lines: list[str] = []
    line = progress.pipe_lines(every=10.0, clock=lambda: now[0], write=lines.append)
    for done in range(1, 131):  # 130 resamples, 0.25 s each: 32.5 s of work
        now[0] += 0.25
        line("bootstrap resamples", done, 130)
    assert lines == ["selcal: bootstrap resamples 40/130", "selcal: bootstrap resamples 80/130",
                     "selcal: bootstrap resamples 120/130"]
    quick: list[str] = []
    short = progress.pipe_lines(every=10.0, clock=lambda: 1.0, write=quick.append)
    short("models", 1, 2)
    assert quick == []


@pytest.mark.slow
def test_evaluate_in_a_pipe_prints_plain_progress_lines_and_q_silences_them(cli, dumps, monkeypatch):
    monkeypatch.setattr(progress, "PIPE_EVERY", 0.0)  # every count gets its line
    logits, labels = make_data(n=300, seed=2)
    path = dumps.npz("m.npz", logits, labels)
    shown = cli("evaluate", path, path, "--bootstrap", "30")
    assert shown.exit_code == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if line.startswith("selcal: ") and "/" in line
             and "warning" not in line]
    assert "selcal: models 2/2" in lines and lines[-1] == "selcal: bootstrap resamples 60/60"  # (over both models)
    assert all(line.split()[-1].replace(",", "").split("/")[0].isdigit() for line in lines)
    assert "\x1b" not in shown.stderr and "\r" not in shown.stderr  # no bar's control characters
    quiet = cli("evaluate", path, path, "--bootstrap", "30", "-q")
    assert quiet.exit_code == 0 and "resamples" not in quiet.stderr and "models 2/2" not in quiet.stderr


@pytest.mark.slow
def test_figures_progress_lines_in_a_pipe_and_q_silences_them(cli, dumps, monkeypatch, tmp_path):
    monkeypatch.setattr(progress, "PIPE_EVERY", 0.0)  # every figure drawn gets its line
    logits, labels = make_data(n=200, seed=3)
    path = dumps.npz("m.npz", logits, labels)
    shown = cli("evaluate", path, "--plots", str(tmp_path / "shown"), "--figures", "rc")
    assert shown.exit_code == 0, shown.stderr
    assert any(line.startswith("selcal: figures ") for line in shown.stderr.splitlines()), shown.stderr
    quiet = cli("evaluate", path, "--plots", str(tmp_path / "quiet"), "--figures", "rc", "-q")
    assert quiet.exit_code == 0, quiet.stderr
    assert "figures" not in quiet.stderr and list((tmp_path / "quiet").iterdir())  # drawn, silently
