"""Result objects and their renderings: JSON (schema 1) and the terminal table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import __version__

__all__ = ["ModelResult", "EvaluationResult", "SCHEMA_VERSION", "to_jsonable"]

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
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    curves: dict[str, Any] = field(default_factory=dict, repr=False)
    score_values: dict[str, Any] = field(default_factory=dict, repr=False)
    rows: Any = field(default=None, repr=False)
    groups: Any = field(default=None, repr=False)

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
            "accuracy": self.accuracy, "error": self.error, "nll": self.nll,
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


def _format(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f}"
    return f"{value:.4f}"


def render_table(result: EvaluationResult, console) -> None:
    """Print one rich table per model: metrics as rows, scores as columns."""
    from rich.table import Table

    for model in result.models:
        score_names = list(model.scores)
        header = (
            f"[bold]{model.name}[/bold]  K={model.num_classes}  evaluated on {model.n_eval} rows"
            + (f", fitted on {model.n_val} ({model.split})" if model.n_val else "")
            + f"  accuracy {100 * model.accuracy:.2f}%"
        )
        console.print(header)
        table = Table(show_edge=False, pad_edge=False)
        table.add_column("metric")
        for name in score_names:
            table.add_column(name, justify="right")
        some = next(iter(model.scores.values()), {})
        risk_rows = [(k, f"cov@risk {100 * float(k[4:]):g}% (%)", "pct") for k in some if k.startswith("cov@")]
        coverage_rows = [(k, f"risk@cov {100 * float(k[5:]):g}% (%)", "pct") for k in some if k.startswith("risk@")]
        for key, label, kind in _SELECTIVE_ROWS + risk_rows + coverage_rows:
            table.add_row(label, *(_format(model.scores[s].get(key), kind) for s in score_names))
        model_level = {"nll": model.nll, "brier": model.brier, "cece": model.cece}
        table.add_section()
        for key, label, kind in _CALIBRATION_ROWS:
            cells = []
            for s in score_names:
                value = model.scores[s].get(key)
                if value is None and s == "msp":
                    value = model_level.get(key)
                cells.append(_format(value, kind))
            if any(c != "-" for c in cells):
                table.add_row(label, *cells)
        console.print(table)
        notes = []
        if "temp" in model.scores:
            t = model.scores["temp"]
            notes.append(f"temp: T = {t['temperature']:.4f} (validation NLL {t['val_nll_before']:.4f} -> {t['val_nll_after']:.4f})")
        if "pnorm" in model.scores:
            p = model.scores["pnorm"]
            centre = "centred" if p["center"] else "uncentred"
            notes.append(f"pnorm: p = {p['p']} ({centre}, by validation {p['objective'].upper()})"
                         + ("; falls back to MSP, which is no worse on validation" if p["fallback"] else ""))
        for note in notes:
            console.print(f"  {note}")
        for warning in model.warnings:
            console.print(f"  [yellow]warning:[/yellow] {warning}")
        console.print()
