"""What ``--help`` shows: panels in a user's order, built from the panels ``cli/groups.py`` declares;
every option in one panel; a word for what an option takes, never Typer's ``<type>``; whole defaults
at 80 columns; ``selcal`` alone prints the usage; a usage error points at the command's own help."""

from __future__ import annotations

import re
import sys

import pytest

from selcal.cli import app
from selcal.cli.groups import PANELS, panel_of

COMMANDS = [command.name or command.callback.__name__ for command in app.registered_commands]
PANEL_ROW = re.compile(r"│ (?:-\w, )?(--[\w-]+|[A-Z][A-Z0-9.]*)")  # (a row's first line: its flag or name)


def help_text(cli, *command: str, columns: int = 80) -> str:
    result = cli(*command, "--help", env={"COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout


def panels(text: str) -> dict[str, list[str]]:
    """Each panel's title and the first word of each of its rows (an option's flag, an argument's name)."""
    found = {}
    for title, body in re.findall(r"╭─ (.+?) ─+╮\n(.*?)╰", text, re.S):
        found[title] = [m.group(1) for line in body.splitlines() if (m := PANEL_ROW.match(line))]
    return found


def click_command(name: str):
    import typer.main

    return typer.main.get_command(app).commands[name]


def test_evaluate_help_is_in_panels_in_a_users_order(cli):
    assert list(panels(help_text(cli, "evaluate"))) == [
        "Arguments", "Input", "Scores and fits", "Metrics", "Intervals", "Leaderboard and outputs",
        "Figures and report", "Run"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_in_the_panel_groups_declares(cli, command):
    shown = panels(help_text(cli, command, columns=200))
    expected: dict[str, list[str]] = {}
    ranks = {}
    for param in click_command(command).params:
        if param.param_type_name != "option":
            continue
        assert any(param.name in names for names in PANELS.values()), \
            f"{command} --{param.name}: name its panel in cli/groups.py PANELS"
        rank, title = panel_of(command, param.name)
        ranks[title] = rank
        expected.setdefault(title, []).append(next(o for o in param.opts if o.startswith("--")))
    expected.setdefault("Run", []).append("--help")
    assert {title: rows for title, rows in shown.items() if title != "Arguments"} == expected
    order = [ranks.get(title, len(PANELS)) for title in shown if title != "Arguments"]
    assert order == sorted(order)  # the panels in the order PANELS declares


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_what_an_option_takes_whole_at_80_columns(cli, command):
    text = help_text(cli, command)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # nothing cut off
    assert not re.search(r"<(bool|str|int|float|path|list\[|Path)", text)  # a word, never Typer's <type>
    if command in ("evaluate", "compare"):
        assert "msp,max_logit,pnorm,temp]" in text  # the default, whole
        assert re.search(r"--center / --no-center\s+Centre", text)  # the flag pair, no type after it


@pytest.mark.parametrize("command", [[], *[[c] for c in COMMANDS]])
def test_dash_h_is_help_on_every_command(cli, command):
    short, long = cli(*command, "-h"), cli(*command, "--help")
    assert short.exit_code == 0 and short.stdout.lstrip().startswith("Usage: ")
    assert short.stdout == long.stdout


def test_a_command_description_of_several_lines_reads_as_one_paragraph(cli):
    """rich keeps a docstring's line breaks; the commands panel showed threshold's cut in the middle."""
    rows = [line for line in help_text(cli).splitlines() if "threshold" in line or "certified" in line]
    assert any("certified: at most r with probability" in line for line in rows), rows


# ------------------------------------------------------------------ the command line itself
def run_selcal(monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    """``selcal ARGV`` through :func:`selcal.cli.run` (one-line errors, exit statuses), in-process."""
    import selcal.cli

    monkeypatch.setattr(selcal.cli, "catch_signals", lambda: None)  # (pytest keeps its own handlers)
    monkeypatch.setattr(sys, "argv", ["selcal", *argv])
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as stopped:
        selcal.cli.run()
    out = capsys.readouterr()
    return stopped.value.code, out.out, out.err


def test_selcal_alone_prints_the_usage_readably(monkeypatch, capsys):
    code, out, err = run_selcal(monkeypatch, capsys)
    assert code == 2 and err == ""  # no command given: a usage error, and the help says what to give
    assert "Usage: selcal [OPTIONS] COMMAND [ARGS]..." in out and "╭─ Commands" in out
    assert "\\n" not in out and "selcal: error" not in out
    for command in COMMANDS:
        assert re.search(rf"│ {command}\s", out), command


@pytest.mark.parametrize("argv, command", [
    (["evaluate"], "selcal evaluate"),
    (["check"], "selcal check"),
    (["compare", "a.parquet"], "selcal compare"),
    (["evaluate", "x.parquet", "--bins"], "selcal evaluate"),  # (the parser's error carries no context)
    (["threshold", "x.parquet", "--no-such-option"], "selcal threshold"),
    (["evaluatex"], "selcal"),
])
def test_a_usage_error_points_at_the_commands_own_help(monkeypatch, capsys, argv, command):
    code, out, err = run_selcal(monkeypatch, capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("selcal: error: ")
    assert err.rstrip().endswith(f"(see {command} --help)")


def test_version_prints_one_line(monkeypatch, capsys):
    from selcal import __version__

    code, out, err = run_selcal(monkeypatch, capsys, "--version")
    assert code == 0 and out == f"selcal {__version__}\n" and err == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_every_choice_option_shows_its_choices(cli, command):
    from selcal.options import CHOICES, COMMAND_CHOICES

    text = " ".join(help_text(cli, command, columns=300).split())
    shown = 0
    for param in click_command(command).params:
        choices = COMMAND_CHOICES.get(command, {}).get(param.name) or CHOICES.get(param.name)
        if choices:
            flag = next(o for o in param.opts if o.startswith("--"))
            assert f"{flag} {'|'.join(choices)} " in text, (command, flag)
            shown += 1
    assert shown or command in ("check", "pixels", "ensemble")


USAGES = {"evaluate": "TEST...", "compare": "A B", "check": "CURRENT", "study": "[RUNS...]", "threshold": "TEST",
          "dump": "[MODEL...]", "pixels": "SEGDIR", "ensemble": "M1 M2 ..."}


@pytest.mark.parametrize("command", COMMANDS)
def test_the_usage_line_writes_arguments_as_a_newcomer_reads_them(cli, command):
    """Required bare, optional in brackets, repeated once with ``...`` (Typer wrote ``{TEST}...``, ``[MODEL...]...``)."""
    usage = help_text(cli, command).splitlines()[0]
    assert usage.startswith("Usage: ") and usage.endswith(f" {command} [OPTIONS] {USAGES[command]}")


def test_the_commands_are_listed_in_a_users_order_in_two_panels(cli):
    from selcal.cli import COMMAND_PANELS

    text = help_text(cli, columns=100)
    listed = {title: re.findall(r"^│ (\w+) ", body, re.M)
              for title, body in re.findall(r"╭─ (.+?) ─+╮\n(.*?)╰", text, re.S) if title != "Options"}
    assert listed == {"Commands": ["evaluate", "compare", "check", "study", "threshold"],
                      "Make dumps": ["dump", "pixels", "ensemble"]}
    assert list(listed) == list(COMMAND_PANELS)


def test_thresholds_score_option_names_every_registered_score_and_no_option_takes_a_bare_text(cli):
    from selcal.scores import REGISTRY

    text = " ".join(help_text(cli, "threshold", columns=300).split())
    assert f"--score SCORE A registered score: {', '.join(REGISTRY)} (default msp)." in text
    for command in COMMANDS:
        assert not re.search(r"--[\w-]+ TEXT\b", help_text(cli, command, columns=300)), command
