"""Every default and every list of choices is written once, in :mod:`selcal.options` (or, for an
estimator or objective, where it is computed, and read there by options): the command's flags, the
Python API's keyword arguments, the help, the metavars, the shell completion read them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import selcal
from selcal import options as settings
from selcal.cli import app

PACKAGE = Path(selcal.__file__).parent
# Parameters that take a setting of selcal: their default, wherever a function declares one, names the
# constant of selcal.options (or of the module that computes it), never a literal typed again.
SETTINGS = {"confidence", "seed", "resamples", "engine", "plot_format", "fmt", "at_coverage", "pixels_per_image",
            "memory_budget", "val_fraction", "errors_top", "risk", "delta", "method", "dtype", "batch_size", "device",
            "rank_maps", "count", "odir_lambda", "odir_mu", "estimator", "aurc_estimator", "aece_estimator",
            "objective", "pnorm_objective", "temp_objective", "n_bins", "bootstrap"}


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bool)


def _defaults(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None]
            for arg, default in pairs:
                yield node.name, arg.arg, default


@pytest.mark.slow
def test_no_default_of_a_setting_is_typed_outside_options():
    typed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "options.py":
            continue
        for function, name, default in _defaults(ast.parse(path.read_text())):
            flag = default.args[0] if isinstance(default, ast.Call) and getattr(default.func, "attr", "") == "Option" \
                and default.args else None
            if (name in SETTINGS and _literal(default)) or (flag is not None and _literal(flag) and name in SETTINGS):
                typed.append(f"{path.relative_to(PACKAGE)}:{default.lineno} {function}({name}=...)")
    assert not typed, "defaults typed again (read them from selcal.options): " + "; ".join(typed)


@pytest.mark.slow
def test_the_level_of_the_intervals_is_typed_once():
    """0.95 was typed five times; now only options.py says it (the TPR of fpr95 and the reliability
    diagram's Clopper-Pearson level are other quantities, named as such)."""
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "options.py"
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Constant) and node.value == 0.95]
    allowed = {"metrics/selective.py", "metrics/functional.py", "figures/data.py", "bootstrap/vectorised.py",
               "bootstrap/null.py"}  # (fpr95's TPR, reliability bands, the null's 95th percentile)
    assert all(place.split(":")[0] in allowed for place in found), found


def _commands():
    import typer.main

    group = typer.main.get_command(app)
    return {name: group.commands[name] for name in group.commands}


@pytest.mark.parametrize("record", [settings.Options, settings.ReadSettings, settings.RunSettings,
                                    settings.FigureSettings])
def test_a_flag_shows_the_default_of_the_field_it_sets(record):
    from dataclasses import MISSING, fields

    checked = 0
    for name, command in _commands().items():
        if name not in (("evaluate", "compare") if record is settings.Options else ("evaluate",)):
            continue  # (the commands that build the record from their flags)
        for param in command.params:
            field = next((f for f in fields(record) if f.name == param.name), None)
            if field is None or field.default is MISSING:
                continue
            flag = param.default
            value = field.default
            if isinstance(value, tuple) and isinstance(flag, str):  # lists are written as the command line does
                flag = getattr(settings.DEFAULTS, param.name, None) if record is settings.Options else flag
            empty = (None, (), [])  # (a repeatable flag given no time is None)
            assert flag == value or flag in empty and value in empty, (command.name, param.name, flag, value)
            checked += 1
    assert checked


def test_every_choice_list_is_read_not_copied():
    """No list of choices typed in the commands (a metavar "png|svg|pdf", a check against a tuple of
    literals): they show and complete :data:`selcal.options.CHOICES`."""
    lists = [*settings.CHOICES.values(), *(c for command in settings.COMMAND_CHOICES.values() for c in command.values())]
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        text = path.read_text()
        for choices in lists:
            assert "|".join(choices) not in text, (path.name, choices)
            assert re.search(r"\(\s*" + r",\s*".join(f'"{c}"' for c in choices) + r"\s*\)", text) is None, \
                (path.name, choices)


def test_the_figures_help_names_every_figure_family(cli):
    text = " ".join(cli("evaluate", "--help", env={"COLUMNS": "300"}).stdout.split())
    assert ", ".join(settings.FIGURE_FAMILIES) in text
