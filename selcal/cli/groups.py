"""Option groups: the options several commands share, declared once (flags and help here,
defaults from :data:`selcal.options.DEFAULTS`), and :func:`options`, which builds
:class:`selcal.Options` from a command's parameters by field name.

A new option that changes a number is a field of Options plus a typer parameter of the same
name; for evaluate and compare both, an entry of :data:`NUMBERS` (and of :data:`SHARED`).
"""

from __future__ import annotations

import functools
import inspect
import typing
from pathlib import Path

import typer

from ..errors import FLAGS, OptionError
from ..options import (CHOICES, COMMAND_CHOICES, DEFAULT_PIXELS_PER_IMAGE, DEFAULTS, FigureSettings, ReadSettings,
                       RunSettings)
from .common import flag_error, say


def scores_help() -> str:
    """The help of ``--scores``: every registered score (plug-ins' too) and every group."""
    from ..scores import REGISTRY
    from ..scores.registry import groups as score_groups

    def members(names) -> str:
        left_out = [name for name in REGISTRY if name not in names]
        return f"all but {', '.join(left_out)}" if len(left_out) < len(names) else ", ".join(names)

    return (f"Scores to evaluate, comma-separated: {', '.join(REGISTRY)}; or a group: "
            + "; ".join(f"'{group}' ({members(names)})" for group, names in score_groups().items()) + ".")


SCORE_HELP = ("A registered score: {scores} (default msp). A fitted score is fitted on a seeded half of the "
              "validation rows and calibrated on the other half. Not for a file of confidences without logits "
              "(--score-col).")


def registry_help(params) -> None:
    """The help of the options that name scores, from the score registry (plug-ins' scores too): read when
    the help is shown (``--help``, the CLI reference), not at start."""
    from ..scores import REGISTRY

    for param in params:
        if param.name == "scores":
            param.help = scores_help()
        elif param.name == "score" and param.param_type_name == "option":
            param.help = SCORE_HELP.format(scores=", ".join(REGISTRY))


def usage_name(param) -> str:
    """An argument as the usage line shows it: ``TEST...``, ``CURRENT``, ``[MODEL...]`` (Typer writes a
    required one in braces, ``{TEST}...``, and a repeated metavar twice, ``[MODEL...]...``)."""
    name = param.metavar or param.name.upper()
    name += "" if param.nargs == 1 or name.endswith("...") else "..."
    return name if param.required else f"[{name}]"


_plugins: list[bool] = []


def load_plugins() -> None:
    """Load the scores that installed packages declare (entry points of the group ``selcal.scores``)
    when a command first needs them: it runs, or its help names the scores. Not at start: reading the
    installed packages' entry points takes longer than importing numpy, and ``selcal --help``,
    ``--version`` and a shell completion need none. A plug-in that failed to load is one warning."""
    if _plugins:
        return
    _plugins.append(True)
    from ..scores.plugins import PROBLEMS, load_entry_points

    load_entry_points()
    for problem in PROBLEMS:  # every other score and command works
        say(f"selcal: warning: {problem}")
READ, RUN, FIGURES = ReadSettings(), RunSettings(), FigureSettings()  # the defaults of the settings' flags
NO_WARNINGS_HELP = "Do not print the warnings about the data on stderr (they stay in the JSON)."
FORMATS = ("Parquet (a file, or a folder or glob of parts), CSV, TSV, JSON Lines, .npz, .npy, .pt/.pth, a folder of "
           "segmentation .npz, fd-shifts raw_logits.npz / raw_output.npz, or lm-evaluation-harness "
           "samples_<task>_<date>.jsonl logs")
FILES_HELP = f"TEST dumps, one model each: {FORMATS} (a folder of logs: a model per log)."
INPUT_HELP = ("What the logit columns hold: logits, probs (probabilities; their logs are the logits, and the scores "
              "that need raw logits are not available) or logprobs. Default: probabilities are detected (every row "
              "in [0, 1] summing to 1 within 1e-3; columns prob_k are probabilities).")
BOUND_HELP = ("METRIC=VALUE, METRIC as msp.aurc (or aurc_msp, the CSV's column), aurc (every score), accuracy or "
              "MODEL:msp.aurc; VALUE in the tables' unit (6%) or as a fraction (0.06); repeatable.")


def _text(values) -> str:
    """A default of Options as the command line writes it: ``0.01,0.05,0.1``, ``1-10``."""
    values = list(values)
    if len(values) > 2 and all(isinstance(v, int) for v in values) and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


# Options that evaluate and compare share (and threshold, ensemble some of them).
SHARED = {
    "scores": dict(default=_text(DEFAULTS.scores), help="Scores to evaluate, comma-separated."),  # (scores_help())
    "bins": dict(default=DEFAULTS.bins, help="Bins of every binned calibration metric."),
    "risks": dict(default=_text(DEFAULTS.risks), help="Risk targets r of cov@r (fractions)."),
    "coverages": dict(default=_text(DEFAULTS.coverages), help="Coverages c of risk@c (fractions)."),
    "aurc_estimator": dict(default=DEFAULTS.aurc_estimator,
                           help="AURC estimator: mean (CONVENTIONS.md) or trapz (Xia et al. code)."),
    "val_fraction": dict(default=DEFAULTS.val_fraction,
                         help="Hold-out fraction when there is no --val and no split column."),
    "seed": dict(default=DEFAULTS.seed, help="Seed of the random hold-out and of the bootstrap."),
    "center": dict(default=DEFAULTS.center, flags=("--center/--no-center",),
                   help="Centre logits before the p-norm (default) or not (eq. 17)."),
    "p_grid": dict(default=_text(DEFAULTS.p_grid), help="Values of p to search, e.g. 1-10 or 1,2,4."),
    "pnorm_objective": dict(default=DEFAULTS.pnorm_objective, help="Validation objective of the p search: aurc or augrc."),
    "temp_objective": dict(default=DEFAULTS.temp_objective, help="Temperature chosen by validation NLL (exact) or by "
                                                                 "validation AURC (a log grid, as Cattelan & Silva)."),
    "odir_lambda": dict(default=DEFAULTS.odir_lambda, help="dirichlet: ODIR weight lambda of the off-diagonal penalty "
                                                            "lambda/(K(K-1)) sum W_ij^2."),
    "odir_mu": dict(default=DEFAULTS.odir_mu, help="dirichlet and vector: weight mu of the bias penalty (mu/K) sum b_j^2."),
    "label_col": dict(default=None, help="Name of the label column (default: the one of label, labels, target, "
                                         "targets, y)."),
    "logits_col": dict(default=None, flags=("--logits-col", "--logits-cols"),
                       help="The logits' list column (default: 'logits'), or the per-class columns of any names, in "
                            "class order: A,B,C (a list), PREFIX* (a prefix) or /REGEX/ (matched whole); the last two "
                            "in the file's column order."),
    "ignore_label": dict(default=None, help="Drop rows with this label (e.g. 255)."),
    "input_kind": dict(default=None, flags=(FLAGS["input_kind"],), help=INPUT_HELP),
    "lm_norm": dict(default=None, flags=("--lm-norm",),
                    help="lm-evaluation-harness logs: none (the choices' log-likelihoods, lm-eval's acc), chars "
                         "(divided by each choice's length in characters, acc_norm) or bytes (in UTF-8 bytes, "
                         "acc_bytes)."),
    "lm_choices": dict(default=None, flags=("--lm-choices",), metavar="K",
                       help="lm-evaluation-harness logs whose questions have different numbers of choices (ARC: 3, 4 "
                            "and 5): read only the questions of K choices."),
    "pixels_per_image": dict(default=None, flags=("--pixels-per-image",), metavar="P",
                             help=f"Segmentation folders: labelled pixels drawn per image (default "
                                  f"{DEFAULT_PIXELS_PER_IMAGE}; 0 = all), the same for every model."),
    "calibration_test": dict(default=DEFAULTS.calibration_test, flags=("--calibration-test",), metavar="M",
                             help="Test calibration: the null distribution of ECE, adaptive ECE and smooth ECE of a "
                                  "perfectly calibrated model with these confidences, from M draws (e.g. 1000; "
                                  "seeded by --seed): the floor, the 95th percentile and the p-value of each "
                                  "score's value (keys ece_floor, ece_null_q95, ece_p, ...). 0: off."),
    "quiet": dict(default=False, flags=("--quiet", "-q"), help="No table on the terminal (warnings still go to stderr)."),
}

# Options of the verdicts, check and compare.
VERDICTS = {
    "tolerance": dict(default=None, flags=("--tolerance",), metavar="METRIC=VALUE",
                      help="Absolute worsening allowed (default 0). " + BOUND_HELP),
    "json_path": dict(default=None, flags=("--json",), help="Write the report as JSON to PATH; '-' for stdout."),
    "markdown_path": dict(default=None, flags=("--markdown",),
                          help="Write the report as Markdown (a PR comment) to PATH; '-' for stdout."),
    "junit_path": dict(default=None, flags=("--junit",), help="Write the report as JUnit XML to PATH."),
    "no_warnings": dict(default=False, flags=("--no-warnings",),
                        help=NO_WARNINGS_HELP + " The Markdown and JUnit keep them."),
    "show_all": dict(default=False, flags=("--all",),
                     help="Judge and show every metric of every score (default: the primary metrics)."),
}

# The options of Options that change a number, given to evaluate and compare by :func:`with_numbers`.
NUMBERS = {"scores": str, "bins": int, "risks": str, "coverages": str, "aurc_estimator": str, "val_fraction": float,
           "center": bool, "p_grid": str, "pnorm_objective": str, "temp_objective": str,
           "odir_lambda": float, "odir_mu": float}


def _declare(spec: dict):
    spec = dict(spec)
    return typer.Option(spec.pop("default"), *spec.pop("flags", ()), **spec)


def shared(name: str):
    """The typer option ``name`` of :data:`SHARED` (a new object for each command)."""
    return _declare(SHARED[name])


def verdict(name: str):
    """The typer option ``name`` of :data:`VERDICTS` (a new object for each command)."""
    return _declare(VERDICTS[name])


# The options of a verdict's report (its files, what it shows), given to check and compare by
# :func:`with_report`; the command reads them from ``ctx.params``.
REPORT = {"json_path": typing.Optional[str], "markdown_path": typing.Optional[str], "junit_path": typing.Optional[str],
          "quiet": bool, "no_warnings": bool, "show_all": bool}


def _adding(group: dict, declare):
    """A decorator that gives a command the options of ``group`` (name -> type), each declared by
    ``declare(name)``: the command's ``**keywords`` become these parameters for Typer."""
    def add(command):
        signature = inspect.signature(command)
        kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=declare(name), annotation=kind)
                 for name, kind in group.items()]
        command.__signature__ = signature.replace(parameters=kept + added)
        command.__annotations__ = {**command.__annotations__, **group}
        return command

    return add


#: Give a command the options of :data:`NUMBERS` (those of Options that evaluate, compare and study
#: share), declared once here; :func:`build_options` reads them.
with_numbers = _adding(NUMBERS, shared)
#: Give a command the options of :data:`REPORT` (check and compare).
with_report = _adding(REPORT, lambda name: verdict(name) if name in VERDICTS else shared(name))


def build(ctx: typer.Context, record, **values):
    """A record of :mod:`selcal.options` (Options, ReadSettings, RunSettings, FigureSettings) from the
    command line: every parameter of the command named as one of its fields (its flag was built from
    that field's default), plus ``values``.

    The record checks and parses the values (the one validation of the Python API too); its errors
    name Python arguments, renamed here to the flags.
    """
    from dataclasses import fields

    given = {f.name: ctx.params[f.name] for f in fields(record) if f.name in ctx.params}
    given.update(values)
    try:
        return record(**given)
    except OptionError as exc:
        raise flag_error(exc) from None


def build_options(ctx: typer.Context, **values):
    """:class:`selcal.Options` from the command line (:func:`build`)."""
    from ..options import Options

    for name in ("score_cols", "uncertainty_cols"):  # (a repeatable flag given no time is None)
        if name in ctx.params:
            values.setdefault(name, tuple(ctx.params[name] or ()))
    return build(ctx, Options, **values)


def score_option_rules(chosen) -> list[tuple]:
    """(parameter, flag, has an effect, why not) of every option that only some scores read
    (their registry entries' ``options``): it has an effect when a chosen score reads it."""
    from ..scores import REGISTRY

    readers: dict[str, list[str]] = {}
    for name, entry in REGISTRY.items():
        for option in entry.options:
            readers.setdefault(option, []).append(name)
    rules = []
    for option, names in readers.items():
        flag = "--center/--no-center" if option == "center" else "--" + option.replace("_", "-")
        why = f"{names[0]} is not in --scores" if len(names) == 1 else f"none of {', '.join(names)} is in --scores"
        rules.append((option, flag, any(n in chosen for n in names), why))
    return rules


# --help in panels, in the order a user thinks of a run: what to read, what to compute, what to
# show. A parameter's panel is named here by its name, once for every command; the panels follow
# this order, and the parameters within a panel the command's own order.
PANELS = {
    "Input": ("pattern", "manifest", "val", "baseline", "data", "models_file", "class_map", "labels", "limit",
              "label_col", "logits_col", "ignore_label", "group_col", "input_kind", "ood_label", "lm_norm",
              "lm_choices", "pixels_per_image"),
    "Scores and fits": ("scores", "score", "score_cols", "score_col", "uncertainty_cols", "val_fraction", "center",
                        "p_grid", "pnorm_objective", "temp_objective", "odir_lambda", "odir_mu", "pretrained",
                        "checkpoint", "num_classes"),
    "Metrics": ("bins", "risks", "coverages", "aurc_estimator", "aece_estimator"),
    "Guarantee": ("risk", "delta", "method", "per_class", "delta_per_group"),
    "Intervals": ("bootstrap", "bootstrap_refit", "confidence", "calibration_test"),
    "Verdict": ("tolerance", "maximum", "minimum", "metric", "allow_other_data", "show_all"),
    "Outputs": ("json_path", "csv_path", "latex_path", "markdown_path", "junit_path", "sort_by", "sweep", "details",
                "errors_csv", "errors_top", "out", "out_dir", "dtype", "errors", "overwrite", "mlflow"),
    "Figures and report": ("plots", "plot_format", "figures", "report", "top", "baselines", "ls_alpha", "at_coverage",
                           "rank_maps", "rank_maps_of"),
    "Run": ("engine", "shards", "device", "batch_size", "workers", "seed", "quiet", "no_warnings"),
}
# A command's own word for a panel, and the options that sit elsewhere in one command.
PANEL_TITLES = {"evaluate": {"Outputs": "Leaderboard and outputs"}, "dump": {"Scores and fits": "Model"}}
PANEL_EXCEPTIONS = {"dump": {"val_fraction": "Outputs"},  # (dump writes the split; it fits nothing)
                    "threshold": {"dtype": "Guarantee"},  # (the precision the certificate holds for)
                    "study": {"baseline": "Verdict"}}  # (a recipe to judge the others against, not a file)
_PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def panel_of(command: str, name: str) -> tuple[int, str]:
    """(rank, title) of the panel of the option ``name`` of ``command``; an option no panel names: Run."""
    panel = PANEL_EXCEPTIONS.get(command, {}).get(name) or _PANEL_OF.get(name, "Run")
    return list(PANELS).index(panel), PANEL_TITLES.get(command, {}).get(panel, panel)

# Metavars of the help (one place): a word for what the option takes, never Typer's <type>.
_METAVARS = {
    "files": "TEST", "current": "CURRENT", "val": "FILE", "baseline": "FILE", "json_path": "PATH",
    "csv_path": "PATH", "markdown_path": "PATH", "junit_path": "PATH", "scores": "LIST", "risks": "LIST",
    "coverages": "LIST", "p_grid": "LIST", "metric": "METRIC", "label_col": "NAME", "logits_col": "NAME",
    "group_col": "NAME", "sort_by": "COLUMN", "ls_alpha": "ALPHA", "device": "DEVICE", "score": "SCORE", "risk": "LIST",
    "delta": "X",
}  # (an option with a fixed set of values shows them: CHOICES)
_TYPE_METAVARS = {int: "N", float: "X", str: "TEXT", Path: "FILE"}


def dress_help(typer_app) -> None:
    """Ready the ``--help`` of every command of ``typer_app``: each option in its panel of
    :data:`PANELS` (the panels in that order, the arguments first), and a metavar for every option
    that takes a value (the word of :data:`_METAVARS`, else one for its type)."""
    for command in typer_app.registered_commands:
        name = command.name or command.callback.__name__
        paragraphs = inspect.cleandoc(command.callback.__doc__ or "").split("\n\n")
        command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)  # (rich keeps single newlines)
        hints = typing.get_type_hints(command.callback)
        signature = inspect.signature(command.callback)
        for parameter_name, parameter in signature.parameters.items():
            info = parameter.default
            if not isinstance(info, (typer.models.OptionInfo, typer.models.ArgumentInfo)):
                continue
            if isinstance(info, typer.models.OptionInfo):
                info.rich_help_panel = panel_of(name, parameter_name)[1]
            choices = COMMAND_CHOICES.get(name, {}).get(parameter_name) or CHOICES.get(parameter_name)
            if choices is not None:  # every value it takes, and <Tab> offers them
                info.metavar = "|".join(choices)
                info.autocompletion = _completer(choices)
            if info.metavar:
                continue
            hint = hints.get(parameter_name)
            while typing.get_args(hint) and hint is not bool:  # Optional[List[X]] -> X
                hint = next(a for a in typing.get_args(hint) if a is not type(None))
            if hint is not bool:
                info.metavar = _METAVARS.get(parameter_name) or _TYPE_METAVARS.get(hint, "VALUE")

        def rank(parameter, command=name):  # the context and the arguments first, in their order; then the panels
            if not isinstance(parameter.default, typer.models.OptionInfo):
                return (-1, 0)
            names = [n for names in PANELS.values() for n in names]
            return (panel_of(command, parameter.name)[0],
                    names.index(parameter.name) if parameter.name in names else len(names))

        ordered = sorted(signature.parameters.values(), key=rank)  # (Typer calls the command by keywords)
        command.callback.__signature__ = signature.replace(
            parameters=[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in ordered])


def _completer(choices):
    def complete(incomplete: str) -> list[str]:
        return [choice for choice in choices if choice.startswith(incomplete)]

    return complete


def _as_given(ctx, value):
    return value


def _flag(param, ctx, value):
    return value if param.callback is None else param.callback(ctx, param, value)


def _no_conversions(command, ctx) -> None:
    """No value converted where none needs it: Typer converts values through pydantic, whose import
    takes longer than numpy's. A flag's value needs none (the completion options' is None when not
    given, which Typer would convert); a shell completion parses the words typed only to know where
    the cursor is, and runs nothing, so none of its values does."""
    for param in command.get_params(ctx):
        if ctx.resilient_parsing:
            param.process_value = _as_given
        elif getattr(param, "is_flag", False):
            param.process_value = functools.partial(_flag, param)


def _no_types(params):
    """No ``<type>`` beside an argument (its name says what it is) or a flag (it takes no value)."""
    for param in params:
        if isinstance(param, typer.core.TyperArgument) or getattr(param, "is_flag", False):
            param.display_type_rich = lambda ctx=None: None
        if isinstance(param, typer.core.TyperArgument):
            param._usage_display_name = functools.partial(usage_name, param)
    return params


class Command(typer.core.TyperCommand):
    """A command of selcal: ``--help`` last, in the Run panel; no ``<type>`` beside an argument or a flag."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.rich_help_panel = "Run"
        return option

    def get_params(self, ctx):
        return _no_types(super().get_params(ctx))

    def parse_args(self, ctx, args):
        _no_conversions(self, ctx)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        load_plugins()
        return super().invoke(ctx)

    def format_help(self, ctx, formatter):
        from .help import render_help

        load_plugins()
        registry_help(self.params)
        render_help(self, ctx)


class Group(typer.core.TyperGroup):
    """The ``selcal`` group: no ``<type>`` beside a flag; its commands in the order they are registered."""

    def get_params(self, ctx):
        return _no_types(super().get_params(ctx))

    def parse_args(self, ctx, args):
        _no_conversions(self, ctx)
        return super().parse_args(ctx, args)

    def format_help(self, ctx, formatter):
        from .help import render_help

        render_help(self, ctx)
