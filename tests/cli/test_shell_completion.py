"""Shell completion: ``--show-completion`` prints the script of a shell, ``--install-completion``
installs it, and the shell's request (Typer's protocol: ``_SELCAL_COMPLETE`` and the words typed)
completes commands, options and the choices of a choice option."""

from __future__ import annotations

import sys

import pytest


# Typer detects the shell it runs in (shellingham); this variable lets a test name the shell instead
# (``--show-completion zsh``), as a user in one shell making the script of another would not need to.
NAMED_SHELL = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


def run_selcal(monkeypatch, capsys, *argv: str, env: dict | None = None) -> tuple[int, str, str]:
    import selcal.cli

    monkeypatch.setattr(selcal.cli, "catch_signals", lambda: None)  # (pytest keeps its own handlers)
    monkeypatch.setattr(sys, "argv", ["selcal", *argv])
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stopped:
        selcal.cli.run()
    out = capsys.readouterr()
    return stopped.value.code, out.out, out.err


def complete(monkeypatch, capsys, line: str) -> list[str]:
    """What bash gets back on <TAB> at the end of ``line``."""
    words = line.split(" ")
    code, out, err = run_selcal(monkeypatch, capsys, env={
        "_SELCAL_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)})
    assert code == 0 and err == "", err
    return out.split()


@pytest.mark.parametrize("shell, marks", [
    ("bash", ["_SELCAL_COMPLETE=complete_bash", "complete -o default -F _selcal_completion selcal"]),
    ("zsh", ["#compdef selcal", "_SELCAL_COMPLETE=complete_zsh"]),
    ("fish", ["complete --command selcal", "_SELCAL_COMPLETE=complete_fish"]),
])
def test_show_completion_prints_the_script_of_each_shell(monkeypatch, capsys, shell, marks):
    code, out, err = run_selcal(monkeypatch, capsys, "--show-completion", shell, env=NAMED_SHELL)
    assert code == 0 and err == ""
    for mark in marks:
        assert mark in out


def test_install_completion_writes_the_script_and_sources_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, err = run_selcal(monkeypatch, capsys, "--install-completion", "bash", env=NAMED_SHELL)
    assert code == 0, err
    script = tmp_path / ".bash_completions" / "selcal.sh"
    assert "_SELCAL_COMPLETE=complete_bash" in script.read_text()
    assert str(script.relative_to(tmp_path)) in (tmp_path / ".bashrc").read_text()
    assert "bash completion installed" in out


def test_completion_names_the_commands_and_their_options(monkeypatch, capsys):
    assert complete(monkeypatch, capsys, "selcal eva") == ["evaluate"]
    assert complete(monkeypatch, capsys, "selcal th") == ["threshold"]
    assert complete(monkeypatch, capsys, "selcal evaluate --boot") == ["--bootstrap", "--bootstrap-refit"]
    assert "--no-center" in complete(monkeypatch, capsys, "selcal compare --no")


@pytest.mark.parametrize("line, expected", [
    ("selcal evaluate --aurc-estimator ", ["mean", "trapz"]),
    ("selcal evaluate --aece-estimator m", ["mbls"]),
    ("selcal compare --temp-objective ", ["nll", "aurc"]),
    ("selcal evaluate --engine ", ["local", "ray"]),
    ("selcal threshold --method ", ["sgr", "ltt"]),
    ("selcal threshold --dtype ", ["float64", "float32"]),
    ("selcal dump --dtype ", ["float32", "float16"]),
])
def test_completion_offers_the_values_of_a_choice_option(monkeypatch, capsys, line, expected):
    assert complete(monkeypatch, capsys, line) == expected
