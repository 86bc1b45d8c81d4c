"""Result objects and their renderings: JSON (schema 1) and the terminal table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import __version__
from .scores import REGISTRY

__all__ = ["ModelResult", "EvaluationResult", "SCHEMA_VERSION", "to_jsonable", "render_table", "metric_sections",
           "leaderboard",
           "render_leaderboard", "leaderboard_markdown", "leaderboard_csv", "LEADERBOARD_COLUMNS"]

SCHEMA_VERSION = 1


@dataclass
class ModelResult:
    """Every number selcal reports for one model (keys as in CONVENTIONS.md's JSON).

    ``scores`` maps a score name to its metrics; ``curves`` keeps each score's
    risk-coverage operating points for plotting; ``score_values`` each score's per-row
    value on the evaluation rows, and ``rows`` the per-row reduction
    (:class:`selcal.evaluate.RowReduction`: correctness, log-MSP, NLL, Brier, ...) for
    bootstrap and plots. None of these three is written to JSON.
    """

    name: str
    path: str
    num_classes: int
    n_eval: int
    n_val: int
    split: str
    accuracy: float
    error: float
    nll: float
    brier: float
    cece: float
    top5_accuracy: float | None = None
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    curves: dict[str, Any] = field(default_factory=dict, repr=False)
    score_values: dict[str, Any] = field(default_factory=dict, repr=False)
    rows: Any = field(default=None, repr=False)
    groups: Any = field(default=None, repr=False)
    clusters: Any = field(default=None, repr=False)  # the image of each pixel row (cluster bootstrap)

    def add_score(self, name: str, metrics: dict[str, Any], curve=None, values=None) -> None:
        self.scores[name] = metrics
        if curve is not None:
            self.curves[name] = curve
        if values is not None:
            self.score_values[name] = values

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name, "path": self.path, "num_classes": self.num_classes,
            "n_eval": self.n_eval, "n_val": self.n_val, "split": self.split,
            "accuracy": self.accuracy,
            **({"top5_accuracy": self.top5_accuracy} if self.top5_accuracy is not None else {}),
            "error": self.error, "nll": self.nll,
            "brier": self.brier, "cece": self.cece,
            "scores": self.scores,
        }
        out.update(self.extra)
        out["warnings"] = list(self.warnings)
        return to_jsonable(out)


@dataclass
class EvaluationResult:
    """The result of ``selcal.evaluate``: one :class:`ModelResult` per TEST file."""

    models: list[ModelResult]
    options: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA_VERSION, "selcal": __version__}
        if self.options is not None:
            out["options"] = _options_dict(self.options)
        out["models"] = [m.to_dict() for m in self.models]
        return out

    def to_json(self) -> str:
        """JSON text; NaN and infinity never appear (undefined values are ``null``)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    def __getitem__(self, name: str) -> ModelResult:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)


def _options_dict(options) -> dict[str, Any]:
    return to_jsonable({
        "scores": list(options.scores), "bins": options.bins, "risks": list(options.risks),
        "coverages": list(options.coverages), "aurc_estimator": options.aurc_estimator,
        "val_fraction": options.val_fraction, "seed": options.seed, "center": options.center,
        "p_grid": list(options.p_grid), "pnorm_objective": options.pnorm_objective,
        "temp_objective": options.temp_objective,
    })


def to_jsonable(value):
    """Plain Python types for JSON: numpy scalars unwrapped, NaN and inf as ``None``."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


# ------------------------------------------------------------------- terminal table
# (key, label, kind) where kind is "pct" (fraction shown as percent) or "num".
_SELECTIVE_ROWS = [
    ("aurc", "AURC (%)", "pct"), ("eaurc", "E-AURC (%)", "pct"), ("augrc", "AUGRC (%)", "pct"),
    ("auroc", "AUROC (%)", "pct"), ("fpr95", "FPR@95%TPR (%)", "pct"),
]
_CALIBRATION_ROWS = [("ece", "ECE (%)", "pct"), ("aece", "adaptive ECE (%)", "pct"), ("mce", "MCE (%)", "pct"),
                     ("nll", "NLL", "num"), ("brier", "Brier", "num"), ("cece", "class-wise ECE (%)", "pct")]


_SPLIT_WORDS = {
    "val-file": "the --val file",
    "split-column": "the 'val' rows of the split column",
    "holdout": "a seeded random hold-out of the TEST rows (give --val to use a file)",
    "image-holdout": "a seeded random hold-out of whole images (give --val to use a folder)",
}


def _and(names: list[str]) -> str:
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def _format(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f}"
    return f"{value:.4f}"


def metric_sections(model: ModelResult) -> list[list[tuple[str, str, list]]]:
    """The rows of a model's metric table, shared by the terminal and the HTML report.

    Two sections (selective, then calibration), each a list of (label, kind, one value per
    score in ``model.scores`` order). Calibration rows that no score has are left out; the
    model-level NLL, Brier and class-wise ECE are shown under ``msp``.
    """
    names = list(model.scores)
    some = next(iter(model.scores.values()), {})
    risk_rows = [(k, f"cov@risk {100 * float(k[4:]):g}% (%)", "pct") for k in some if k.startswith("cov@")]
    coverage_rows = [(k, f"risk@cov {100 * float(k[5:]):g}% (%)", "pct") for k in some if k.startswith("risk@")]
    selective = [(label, kind, [model.scores[n].get(key) for n in names])
                 for key, label, kind in _SELECTIVE_ROWS + risk_rows + coverage_rows]
    model_level = {"nll": model.nll, "brier": model.brier, "cece": model.cece}
    calibration = []
    for key, label, kind in _CALIBRATION_ROWS:
        values = [model.scores[n].get(key, model_level.get(key) if n == "msp" else None) for n in names]
        values = [None if isinstance(v, bool) else v for v in values]
        if any(v is not None for v in values):
            calibration.append((label, kind, values))
    return [selective, calibration]


def render_table(result: EvaluationResult, console) -> None:
    """Print one rich table per model: metrics as rows, scores as columns."""
    from rich.table import Table

    for model in result.models:
        score_names = list(model.scores)
        top5 = f", top-5 accuracy {100 * model.top5_accuracy:.2f}%" if model.top5_accuracy is not None else ""
        console.print(f"[bold]{model.name}[/bold]  K = {model.num_classes}, accuracy {100 * model.accuracy:.2f}%{top5}")
        fitted_text = _and([n for n in score_names if n in REGISTRY and REGISTRY[n].needs_validation]) \
            or "pnorm and temp"
        pixels = model.extra.get("pixels")
        if pixels:  # pixel rows of segmentation images: say how many images, and how they were drawn
            drawn = pixels.get("pixels_per_image")
            console.print(f"  evaluated on {model.n_eval} pixels of {pixels['eval_images']} images"
                          + (f" ({'every labelled pixel' if drawn == 0 else f'at most {drawn} per image'}, "
                             f"seed {pixels.get('seed')}, void label {pixels.get('ignore_label')})"
                             if drawn is not None else "")
                          + (f"; {fitted_text} fitted on {model.n_val} pixels of {pixels.get('val_images')} "
                             f"images, {_SPLIT_WORDS.get(model.split, model.split)}" if model.n_val else ""),
                          markup=False)
        else:
            console.print(f"  evaluated on {model.n_eval} rows" + (
                f"; {fitted_text} fitted on {model.n_val} rows, {_SPLIT_WORDS.get(model.split, model.split)}"
                if model.n_val else ""))
        sections = metric_sections(model)
        # Many scores (--scores all) in a narrow terminal: several tables of the columns that fit.
        per_table = max(4, (console.width - 24) // 10)  # the default four always stay together
        for first in range(0, len(score_names), per_table):
            shown = range(first, min(first + per_table, len(score_names)))
            table = Table(show_edge=False, pad_edge=False)
            table.add_column("metric", no_wrap=True)
            for j in shown:
                table.add_column(score_names[j], justify="right", no_wrap=True)
            for index, section in enumerate(sections):
                rows = [(label, kind, values) for label, kind, values in section
                        if any(values[j] is not None for j in shown) or index == 0]
                if index and rows:
                    table.add_section()
                for label, kind, values in rows:
                    table.add_row(label, *(_format(values[j], kind) for j in shown))
            console.print(table)
        if model.extra.get("groups"):
            console.print(_group_table(model))
        notes = []
        if "temp" in model.scores:
            t = model.scores["temp"]
            chosen = "by validation AURC, " if t.get("objective") == "aurc" else ""
            notes.append(f"temp: T = {t['temperature']:.4f} ({chosen}validation NLL {t['val_nll_before']:.4f} "
                         f"-> {t['val_nll_after']:.4f})")
        if "pnorm" in model.scores:
            p = model.scores["pnorm"]
            centre = "centred" if p["center"] else "uncentred"
            notes.append(f"pnorm: p = {p['p']} ({centre}, by validation {p['objective'].upper()})"
                         + ("; falls back to MSP, which is no worse on validation" if p["fallback"] else ""))
        notes += [REGISTRY[n].note(model.scores[n]) for n in score_names if n in REGISTRY and REGISTRY[n].note]
        for note in notes:
            console.print(f"  {note}")
        for warning in model.warnings:
            console.print(f"  [yellow]warning:[/yellow] {warning}")
        console.print()


def _group_table(model: ModelResult):
    """Per-group rows (``--group-col``): size, accuracy and every score's AURC within the group."""
    from rich.table import Table

    score_names = list(model.scores)
    table = Table(show_edge=False, pad_edge=False, title="per group: accuracy and AURC of each score (%)",
                  title_justify="left")
    for header in ("group", "rows", "accuracy", *score_names):
        table.add_column(header, justify="left" if header == "group" else "right")
    for group, values in model.extra["groups"].items():
        table.add_row(str(group), str(values["n_eval"]), _format(values["accuracy"], "pct"),
                      *(_format(values["scores"][n]["aurc"], "pct") for n in score_names))
    return table


# ---------------------------------------------------------------------- leaderboard
LEADERBOARD_COLUMNS = {
    # column: (short header, kind, lower is better)
    "model": ("model", "text", None),
    "accuracy": ("acc", "pct", False),
    "top5_accuracy": ("top-5", "pct", False),
    "aurc_msp": ("msp", "pct", True),
    "aurc_max_logit": ("max_logit", "pct", True),
    "aurc_pnorm": ("pnorm", "pct", True),
    "p": ("p", "int", None),
    "aurc_temp": ("temp", "pct", True),
    # the AURC of every other registered score (shown when some model has it)
    **{f"aurc_{name}": (name, "pct", True) for name in REGISTRY if name not in ("msp", "max_logit", "pnorm", "temp")},
    "best_posthoc": ("best", "text", None),
    "aurc_best_posthoc": ("best AURC", "pct", True),
    "pnorm_gain": ("pnorm gain", "pct", False),
    "ece_msp": ("ECE msp", "pct", True),
    "ece_temp": ("ECE temp", "pct", True),
}
_NOTES = {
    "aurc_msp": "AURC of each score",
    "aurc_best_posthoc": "the best post-hoc score (one fitted on validation rows) and its AURC",
    "pnorm_gain": "(pnorm) gain = AURC(msp) - AURC(pnorm)",
    "ece_temp": "ECE before/after (T) temperature scaling",
}


def _leaderboard_note(columns) -> str:
    return "in %: accuracy" + (", top-5 accuracy" if "top5_accuracy" in columns else "") + ", " + ", ".join(note for column, note in _NOTES.items() if column in columns)


def leaderboard(result: EvaluationResult, sort_by: str = "aurc_best_posthoc") -> list[dict[str, Any]]:
    """One row per model: accuracy, AURC of every score, the best post-hoc score, the gain
    from pnorm over MSP (positive = pnorm better) and ECE before and after temperature.

    Sorted by ``sort_by``, best first (direction-aware); undefined values last.
    """
    if sort_by not in LEADERBOARD_COLUMNS:
        from .errors import SelcalError

        raise SelcalError(f"--sort-by {sort_by!r} is not a column; choose from {', '.join(LEADERBOARD_COLUMNS)}")
    rows = []
    for model in result.models:
        scores = model.scores
        aurc = {name: scores[name]["aurc"] for name in scores}
        posthoc = {name: aurc[name] for name in aurc if name in REGISTRY and REGISTRY[name].needs_validation}
        best = min(posthoc, key=lambda name: (posthoc[name], name)) if posthoc else None
        rows.append({
            "model": model.name,
            "accuracy": model.accuracy,
            "top5_accuracy": model.top5_accuracy,
            **{f"aurc_{name}": aurc.get(name) for name in REGISTRY},
            "p": scores.get("pnorm", {}).get("p"),
            "best_posthoc": best,
            "aurc_best_posthoc": posthoc.get(best) if best else None,
            "pnorm_gain": aurc["msp"] - aurc["pnorm"] if "msp" in aurc and "pnorm" in aurc else None,
            "ece_msp": scores.get("msp", {}).get("ece"),
            "ece_temp": scores.get("temp", {}).get("ece"),
        })
    lower_is_better = LEADERBOARD_COLUMNS[sort_by][2]

    def key(row):
        value = row[sort_by]
        if value is None:
            return (1, 0)
        if isinstance(value, str) or lower_is_better is None:
            return (0, value)
        return (0, value if lower_is_better else -value)

    return sorted(rows, key=key)


def _cell(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f}"
    return str(value)


def render_leaderboard(rows: list[dict[str, Any]], console) -> None:
    """The leaderboard as a rich table (percent columns labelled)."""
    from rich.table import Table

    columns = [c for c in LEADERBOARD_COLUMNS if any(row[c] is not None for row in rows)]
    headers = {c: LEADERBOARD_COLUMNS[c][0] for c in columns}
    if console.width < 125:  # a narrow terminal: keep the columns the leaderboard is for, short headers
        columns = [c for c in columns if c not in ("aurc_max_logit", "best_posthoc", "aurc_temp", "aurc_best_posthoc")]
        headers.update(pnorm_gain="gain", ece_msp="ECE", ece_temp="ECE T")
    table = Table(show_edge=False, pad_edge=False, caption=_leaderboard_note(columns), caption_justify="left")
    for column in columns:
        if column == "model":
            table.add_column("model", overflow="ellipsis", no_wrap=True, max_width=max(14, console.width - 52))
        else:
            table.add_column(headers[column], justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(_cell(row[c], LEADERBOARD_COLUMNS[c][1]) for c in columns))
    console.print(table)


def leaderboard_markdown(rows: list[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table (for a PR comment)."""
    columns = [c for c in LEADERBOARD_COLUMNS if any(row[c] is not None for row in rows)]
    lines = ["| " + " | ".join(LEADERBOARD_COLUMNS[c][0] for c in columns) + " |",
             "|" + "|".join("---" if c == "model" else "---:" for c in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row[c], LEADERBOARD_COLUMNS[c][1]) for c in columns) + " |")
    return "\n".join(lines) + f"\n\n{_leaderboard_note(columns)}\n"


def leaderboard_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with fractions at full precision (not percent), one row per model."""
    import polars as pl

    frame = pl.DataFrame(rows, schema={c: (pl.Utf8 if LEADERBOARD_COLUMNS[c][1] == "text" else
                                          pl.Int64 if c == "p" else pl.Float64) for c in LEADERBOARD_COLUMNS})
    return frame.write_csv()
