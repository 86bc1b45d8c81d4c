"""Regression checks for CI: ``selcal check`` (two result JSON files) and ``selcal compare`` (two dumps).

Pure except for reading inputs: result JSON files (here) and logit dumps (through
:mod:`selcal.io`). Every problem with an input raises :class:`~selcal.errors.SelcalError`
with one line naming the file and what to do (the CLI exits with status 2); the outcome
of a check is a :class:`Report` (exit status 0 or 1) rendered as a terminal table, JSON,
Markdown or JUnit XML.

The rule of ``check`` (also in the README), for every metric with a direction:

* worse_by = current - baseline when lower is better, baseline - current when higher is;
* a **regression** is worse_by > tolerance (absolute, ``--tolerance``, default 0) **and**,
  when both files carry a bootstrap interval for the metric, intervals that do not overlap
  (current's interval entirely on the worse side of the baseline's). When a file has no
  intervals at all, worse_by > tolerance alone is a regression; in bootstrapped files, a
  metric without an interval (class-wise ECE) is judged only when a ``--tolerance`` names it;
* ``--max``/``--min`` bounds are checked on the current point value; an undefined value
  (``null``) fails a bound, since it cannot be shown to hold.

``compare`` uses the paired interval of B - A (both models on the same resampled rows):
B is worse when that interval lies entirely on the worse side of 0, and a regression when
it is worse and worse_by > tolerance.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence
from xml.etree import ElementTree

import numpy as np

from . import gate
from .errors import SelcalError
from .metrics import catalog
from .metrics.catalog import better
from .scores import REGISTRY as SCORE_NAMES

__all__ = [
    "LOWER_IS_BETTER",
    "HIGHER_IS_BETTER",
    "better",
    "load_result",
    "parse_bounds",
    "parse_specs",
    "Spec",
    "Row",
    "Report",
    "check",
    "compare",
    "compare_files",
]

# Directions and levels are the catalog's (selcal.metrics.catalog); these names stay for callers.
LOWER_IS_BETTER = tuple(k for k, m in catalog.CATALOG.items() if m.lower_is_better is True and not m.family)
HIGHER_IS_BETTER = tuple(k for k, m in catalog.CATALOG.items() if m.lower_is_better is False and not m.family)
MODEL_LEVEL = catalog.model_level()
SUPPORTED_SCHEMA = 1
CHECK_RULE = (
    "regression = worse than the baseline by more than the tolerance and, when both files have "
    "bootstrap intervals, significantly so: one-sided p-value from the two intervals, Holm over "
    "every judged metric at family-wise level (1 - confidence) / 2"
)
COMPARE_RULE = (
    "B - A on paired bootstrap resamples: regression = worse by more than the tolerance with a "
    "one-sided paired bootstrap p-value that Holm rejects over every judged metric at family-wise "
    "level (1 - confidence) / 2"
)


# --------------------------------------------------------------------------- loading
def load_result(path) -> dict[str, Any]:
    """Read and validate a result JSON written by ``selcal evaluate --json`` (schema 1)."""
    path = str(path)
    if not os.path.exists(path):
        raise SelcalError(f"{path}: no such file; check the path (write it with `selcal evaluate --json {path}`)")
    if os.path.isdir(path):
        raise SelcalError(f"{path}: is a folder; give the JSON file `selcal evaluate --json` wrote")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise SelcalError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); "
                          "give the file `selcal evaluate --json` wrote") from None
    except RecursionError:  # hostile nesting (e.g. 100 000 levels of [[[...]]]): no result is that deep
        raise SelcalError(f"{path}: JSON nested too deeply to be a selcal result; "
                          "give the file `selcal evaluate --json` wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SelcalError(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(data, dict) or "schema" not in data:
        raise SelcalError(f"{path}: not a selcal result (no 'schema' key); give the file `selcal evaluate --json` wrote")
    schema = data["schema"]
    if schema != SUPPORTED_SCHEMA:
        raise SelcalError(f"{path}: has result schema {schema!r} but this selcal reads schema {SUPPORTED_SCHEMA}; "
                          "evaluate both files with the same selcal version")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise SelcalError(f"{path}: schema 1 result without a non-empty 'models' list; regenerate it with selcal evaluate")
    for index, model in enumerate(models):
        if not isinstance(model, dict) or not isinstance(model.get("name"), str) \
                or not isinstance(model.get("scores"), dict):
            raise SelcalError(f"{path}: models[{index}] lacks 'name' or 'scores'; regenerate it with selcal evaluate")
    for model in models:
        _check_values(path, model)
    names = [m["name"] for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SelcalError(f"{path}: two models are named '{duplicates[0]}'; names must be unique to be matched")
    return data


def _check_values(path: str, model: dict[str, Any]) -> None:
    """Refuse a judged metric whose value is neither a number nor null (a string would count as undefined)."""
    def bad(key: str, value) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):  # NaN/Infinity: not JSON, never written
            raise SelcalError(f"{path}: model '{model['name']}', key '{key}': {json.dumps(value)[:40]} is not a "
                              "number or null; give the file `selcal evaluate --json` wrote")

    for key in MODEL_LEVEL:
        bad(key, model.get(key))
    for score, values in model["scores"].items():
        if not isinstance(values, dict):
            raise SelcalError(f"{path}: model '{model['name']}', key 'scores.{score}' is not an object; "
                              "give the file `selcal evaluate --json` wrote")
        for key, value in values.items():
            if better(key) is not None:
                bad(f"scores.{score}.{key}", value)


@dataclass
class Metric:
    """One directed number of one model in a result: ``name`` is ``score.metric`` or a model-level key."""

    model: str
    name: str
    score: str | None
    metric: str
    value: float | None
    ci: list[float] | None


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _interval(value) -> list[float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) is not None for v in value):
        return [float(value[0]), float(value[1])]
    return None


def metrics_of(model: dict[str, Any]) -> dict[str, Metric]:
    """Every metric with a direction of a model's JSON dict, keyed by qualified name."""
    out: dict[str, Metric] = {}
    model_ci = model.get("ci") if isinstance(model.get("ci"), dict) else {}
    for key in MODEL_LEVEL:
        if key in model:
            out[key] = Metric(model["name"], key, None, key, _number(model[key]), _interval(model_ci.get(key)))
    for score, values in model["scores"].items():
        if not isinstance(values, dict):
            continue
        score_ci = values.get("ci") if isinstance(values.get("ci"), dict) else {}
        for key, value in values.items():
            if better(key) is not None:
                name = f"{score}.{key}"
                out[name] = Metric(model["name"], name, score, key, _number(value), _interval(score_ci.get(key)))
    return out


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class Spec:
    """Which metrics an option names: ``[MODEL:][SCORE.]METRIC``, or ``*`` for every metric."""

    text: str
    model: str | None
    score: str | None
    metric: str | None  # None: every metric

    def matches(self, metric: Metric) -> bool:
        return ((self.model is None or self.model == metric.model)
                and (self.metric is None or self.metric == metric.metric)
                and (self.score is None or self.score == metric.score))

    @property
    def specificity(self) -> tuple[int, int, int]:
        return (self.score is not None, self.model is not None, self.metric is not None)


def parse_spec(text: str, option: str) -> Spec:
    """``msp.aurc``, ``aurc`` (every score's), ``accuracy``, ``resnet:msp.aurc``, ``*``.

    Examples
    --------
    >>> parse_spec("msp.cov@0.05", "--max")
    Spec(text='msp.cov@0.05', model=None, score='msp', metric='cov@0.05')
    """
    model, _, name = text.strip().rpartition(":")
    name = name.strip()
    model = model.strip() or None
    if name == "*":
        return Spec(text, model, None, None)
    head, dot, tail = name.partition(".")
    # a registered score, or any other name before a metric with a direction: a score column (--score-col)
    score, metric = (head, tail) if dot and (head in SCORE_NAMES or better(tail) is not None) else (None, name)
    if not metric or better(metric) is None:
        known = ", ".join(LOWER_IS_BETTER + HIGHER_IS_BETTER + ("cov@R", "risk@C"))
        raise SelcalError(f"{option} {text}: '{metric or name}' is not a metric with a direction; "
                          f"use [SCORE.]METRIC with METRIC one of {known}")
    return Spec(text, model, score, metric)


def parse_specs(texts: Iterable[str], option: str) -> list[Spec]:
    return [parse_spec(t, option) for t in texts or ()]


def parse_bounds(texts: Iterable[str], option: str) -> list[tuple[Spec, float]]:
    """``["msp.aurc=0.06", ...]`` -> [(Spec, 0.06), ...]; bad syntax raises SelcalError."""
    out = []
    for text in texts or ():
        name, equals, value = text.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not equals or not name.strip() or not math.isfinite(number):
            raise SelcalError(f"{option} takes METRIC=VALUE, e.g. {option} msp.aurc=0.06; got {text!r}")
        if option == "--tolerance" and number < 0:
            raise SelcalError(f"--tolerance {text}: a tolerance must be >= 0")
        out.append((parse_spec(name, option), number))
    return out


def _most_specific(bounds: Sequence[tuple[Spec, float]], metric: Metric) -> float | None:
    matching = [(spec.specificity, index, value) for index, (spec, value) in enumerate(bounds) if spec.matches(metric)]
    return max(matching)[2] if matching else None


def _require_matches(specs: Iterable[Spec], metrics: Sequence[Metric], option: str, path: str) -> None:
    for spec in specs:
        if not any(spec.matches(m) for m in metrics):
            raise SelcalError(f"{option} {spec.text}: {path} has no such metric; "
                              "names look like msp.aurc, aurc (every score), accuracy or MODEL:msp.aurc")


# ------------------------------------------------------------------------------ rows
@dataclass
class Row:
    """One judged number. For ``check``: reference = baseline (or the bound), value = current;
    for ``compare``: reference = A, value = B, and ``ci_difference`` the paired interval of B - A."""

    model: str
    metric: str
    better: str
    kind: str  # "baseline", "max", "min", "compare"
    reference: float | None
    value: float | None
    difference: float | None = None
    ci_reference: list[float] | None = None
    ci_value: list[float] | None = None
    ci_difference: list[float] | None = None
    tolerance: float | None = None
    status: str = ""
    failed: bool = False
    p_value: float | None = None  # one-sided, of "not worse by more than the tolerance" (see selcal.gate)
    close: bool = False  # passed, but within CLOSE of failing (see is_close); set by Report


CLOSE = 0.1


def is_close(row: Row, margin: float = CLOSE) -> bool:
    """Did ``row`` pass, but would fail if every threshold it passed were moved ``margin`` (10%)
    of the way towards failing? Those rows are shown by default, with the failures.

    * a bound (``--max``/``--min``): the value is within ``margin * |bound|`` of it;
    * against a baseline: worse_by > (1 - margin) * tolerance and, when both files have
      intervals, the intervals overlap by at most ``margin`` of the current interval's width;
    * ``compare``: worse_by > (1 - margin) * tolerance and the paired interval of B - A
      reaches at most ``margin`` of its width past 0 on the better side.

    Examples
    --------
    >>> is_close(Row("m", "msp.aurc", "lower", "max", 0.06, 0.0599))
    True
    >>> is_close(Row("m", "msp.aurc", "lower", "max", 0.06, 0.05))
    False
    """
    if row.failed or row.value is None or row.reference is None:
        return False
    if row.kind in ("max", "min"):
        slack = row.reference - row.value if row.kind == "max" else row.value - row.reference
        return slack <= margin * abs(row.reference)
    worse_by = _worse_by(row.better, row.reference, row.value)
    if worse_by <= 0 or worse_by <= (1 - margin) * (row.tolerance or 0.0):
        return False
    lower = row.better == "lower"
    if row.kind == "compare":
        ci = row.ci_difference
        if ci is None:
            return False
        past_zero = -ci[0] if lower else ci[1]  # how far the interval reaches to the better side of 0
        return past_zero <= margin * (ci[1] - ci[0])
    if row.ci_reference is None or row.ci_value is None:
        return True
    overlap = row.ci_reference[1] - row.ci_value[0] if lower else row.ci_value[1] - row.ci_reference[0]
    return overlap <= margin * (row.ci_value[1] - row.ci_value[0])


@dataclass
class Report:
    """The outcome of ``check`` or ``compare``: rows, notes, and the exit status it implies."""

    command: str
    rows: list[Row]
    sources: dict[str, str]
    rule: str
    confidence: float | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (model, text): the data's warnings

    def __post_init__(self) -> None:
        for row in self.rows:
            row.close = is_close(row)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.failed]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def to_dict(self) -> dict[str, Any]:
        from .results import to_jsonable

        return to_jsonable({
            "command": self.command, "status": "fail" if self.failures else "pass", "exit_code": self.exit_code,
            "rule": self.rule, **self.sources, "confidence": self.confidence, "notes": self.notes,
            "failures": len(self.failures), "rows": [asdict(r) for r in self.rows],
            "warnings": [{"model": model, "warning": text} for model, text in self.warnings],
        })

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    def summary(self) -> str:
        n_failed = len(self.failures)
        what = "regression" if self.command == "compare" else "failure"
        passed = "B is not worse than A on any judged metric" if self.command == "compare" \
            else "every metric within bounds"
        verdict = f"FAIL: {n_failed} {what}{'s' if n_failed != 1 else ''}" if n_failed else f"PASS: {passed}"
        return f"selcal {self.command}: {verdict} ({len(self.rows)} metrics checked)"

    # ------------------------------------------------------------------ renderings
    def _columns(self) -> list[str]:
        if self.command == "compare":
            return ["model", "metric", "better", "A", "B", "B - A", f"{self._level()} interval of B - A", "p",
                    "verdict"]
        return ["model", "metric", "better", "baseline / bound", "current", "difference",
                f"baseline {self._level()}", f"current {self._level()}", "tolerance", "p", "status"]

    def _level(self) -> str:
        return f"{100 * self.confidence:g}%" if self.confidence else "CI"

    def _cells(self, row: Row) -> list[str]:
        """The cells of the Markdown and JUnit renderings: metric key, values in the units of the
        evaluate table (percent where it shows percent)."""
        key = row.metric
        if self.command == "compare":
            return [row.model, key, row.better, _unit(key, row.reference), _unit(key, row.value),
                    _unit(key, row.difference, True), _unit_ci(key, row.ci_difference), _fmt_p(row.p_value),
                    row.status]
        reference = _unit(key, row.reference)
        if row.kind in ("max", "min"):
            reference = f"{row.kind} {reference}"
        return [row.model, key, row.better, reference, _unit(key, row.value), _unit(key, row.difference, True),
                _unit_ci(key, row.ci_reference), _unit_ci(key, row.ci_value), _unit(key, row.tolerance),
                _fmt_p(row.p_value), row.status]

    def _terminal_cells(self, row: Row) -> list[str]:
        """A row for the terminal (fits 100 columns): intervals go on a second line in their cell;
        names and units those of the evaluate table (``msp AURC (%)``, 0.95)."""
        metric_label = catalog.label

        key = row.metric

        def value(number, ci=None, prefix="", signed=False):
            text = prefix + _unit(key, number, signed)
            return text + (f"\n{_unit_ci(key, ci)}" if ci is not None else "")

        status = row.status + (f" {_unit(key, row.tolerance)}" if row.status == "worse, within tolerance" else "")
        if row.p_value is not None:
            status += f"\np = {_fmt_p(row.p_value)}"
        if self.command == "compare":
            return [metric_label(key), _unit(key, row.reference), _unit(key, row.value),
                    value(row.difference, row.ci_difference, signed=True), status]
        reference = value(row.reference, row.ci_reference, f"{row.kind} " if row.kind in ("max", "min") else "")
        return [metric_label(key), reference, value(row.value, row.ci_value), _unit(key, row.difference, True), status]

    def _terminal_columns(self) -> list[str]:
        if self.command == "compare":
            return ["metric", "A", "B", f"B - A, {self._level()} interval", "verdict"]
        return ["metric", "baseline / bound", f"current ({self._level()})" if self.confidence else "current",
                "difference", "status"]

    def render(self, console, show_all: bool = False) -> None:
        """Tables on the terminal, one per model: by default only the rows that failed or were
        close (:func:`is_close`), failures first; ``show_all`` every row. Fits 100 columns:
        intervals sit under their value, the "better" and "tolerance" columns of the other
        renderings are left out; metrics are named as in the evaluate tables (``msp AURC``)."""
        from rich.markup import escape
        from rich.table import Table

        from .escape import printable, terminal

        columns = self._terminal_columns()
        few = len(self.rows) <= _FEW_ROWS
        shown = [r for r in self.rows if show_all or few or r.failed or r.close]
        for model in dict.fromkeys(r.model for r in shown):
            rows = [r for r in shown if r.model == model]
            console.print(f"[bold]{terminal(model)}[/bold]", soft_wrap=True)
            table = Table(show_edge=False, pad_edge=False)
            for position, name in enumerate(columns):
                table.add_column(name, justify="left" if position in (0, len(columns) - 1) else "right",
                                 no_wrap=position < len(columns) - 1)
            for row in [r for r in rows if r.failed] + [r for r in rows if not r.failed]:
                cells = self._terminal_cells(row)  # the metric's name, then selcal's numbers (an interval on a 2nd line)
                cells = [terminal(cells[0])] + [terminal(cell, keep="\n") for cell in cells[1:]]
                if row.failed:
                    cells[-1] = f"[bold red]{cells[-1]}[/bold red]"
                elif row.close:
                    cells[-1] = f"[yellow]{cells[-1]} (close)[/yellow]"
                table.add_row(*cells)
            from .report.table import measure_width

            if measure_width(console, table, least=True) <= console.width:  # (the metric and status columns wrap)
                console.print(table)
                continue
            for row in [r for r in rows if r.failed] + [r for r in rows if not r.failed]:  # a narrow terminal: lines
                cells = [printable(c).replace("\\n", " ") if i == 0 else c.replace("\n", " ")
                         for i, c in enumerate(self._terminal_cells(row))]
                close = " (close)" if row.close and not row.failed else ""
                console.print(f"  {cells[0]}: " + ", ".join(f"{name} {cell}" for name, cell in zip(columns[1:-1], cells[1:-1]))
                              + f"; {cells[-1]}{close}", soft_wrap=True, markup=False, highlight=False)
        for note in self.notes:
            console.print(_wrap(f"note: {printable(note)}", console.width), markup=False, highlight=False)
        if not show_all and not few:
            n_close = sum(1 for r in self.rows if r.close)
            close = f"close: within {100 * CLOSE:g}% of a bound, a tolerance or separate intervals"
            text = (f"shown: {len(self.failures)} failed and {n_close} close of {len(self.rows)} metrics ({close}); "
                    "--all shows every metric") if shown else \
                f"no metric failed or came close ({close}); --all shows all {len(self.rows)}"
            console.print(_wrap(f"note: {text}", console.width), markup=False, highlight=False)
        style = "bold red" if self.failures else "bold green"
        console.print(f"[{style}]{escape(_wrap(self.summary(), console.width))}[/{style}]")

    def to_markdown(self) -> str:
        """Markdown for a pull-request comment: verdict, failures, then every row folded away."""
        from .escape import code_span, markdown_text as md

        metric_label = catalog.label

        lines = [f"### {'❌' if self.failures else '✅'} {self.summary()}", ""]
        lines += [f"- {k}: {code_span(v)}" for k, v in self.sources.items()]
        lines += [f"- rule: {md(self.rule)}"]
        lines += [f"- note: {md(note)}" for note in self.notes]
        lines.append("")
        if self.warnings:
            lines += ["**Warnings about the data**", ""]
            lines += [f"- ⚠️ {md(model)}: {md(text)}" for model, text in self.warnings] + [""]
        header = self._columns()

        def table(rows):
            out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            for row in rows:
                cells = self._cells(row)
                cells[1] = metric_label(row.metric)  # the names of the evaluate tables; keys in JSON and JUnit
                cells = [md(c) for c in cells[:2]] + [c.replace("|", "\\|") for c in cells[2:]]  # user text: model, metric
                if row.failed:
                    cells[-1] = f"**{cells[-1]}**"
                out.append("| " + " | ".join(cells) + " |")
            return out

        if self.failures:
            lines += ["**Failures**", ""] + table(self.failures) + [""]
        close = [r for r in self.rows if r.close]
        if close:
            lines += [f"**Close** (passed, within {100 * CLOSE:g}% of failing)", ""] + table(close) + [""]
        lines += ["<details><summary>All metrics</summary>", ""] + table(self.rows) + ["", "</details>", ""]
        return "\n".join(lines)

    def to_junit(self) -> str:
        """JUnit XML: one test case per row; a ``<failure>`` per failed row, ``<skipped>`` with its
        reason for a row that could not be judged (worse but without an interval, undefined).

        The class name is ``selcal.COMMAND.MODEL`` with the dots of the model name replaced by
        ``_`` (GitHub, GitLab and Jenkins split class names on dots: ``lspair_alpha0.1`` would
        become a package ``lspair_alpha0`` and a class ``1``); the real name is then appended to
        the test name. The data's warnings are suite properties named ``warning`` and its
        ``<system-err>``.
        """
        from .escape import xml_text as x

        skipped = [row for row in self.rows if _skip_reason(row)]
        suite = ElementTree.Element("testsuite", name=f"selcal {self.command}", tests=str(len(self.rows)),
                                    failures=str(len(self.failures)), errors="0", skipped=str(len(skipped)), time="0")
        if self.warnings:
            properties = ElementTree.SubElement(suite, "properties")
            for model, text in self.warnings:
                ElementTree.SubElement(properties, "property", name="warning", value=x(f"{model}: {text}"))
        for row in self.rows:
            name = row.metric if row.kind in ("baseline", "compare") else f"{row.metric} {row.kind} {_fmt(row.reference)}"
            model = row.model.replace(".", "_")
            if model != row.model:
                name += f" (model {row.model})"
            case = ElementTree.SubElement(suite, "testcase", classname=x(f"selcal.{self.command}.{model}"),
                                          name=x(name), time="0")
            details = x(" ".join(f"{c}={v}" for c, v in zip(self._columns(), self._cells(row))))
            if row.failed:
                failure = ElementTree.SubElement(case, "failure", message=x(f"{row.metric}: {row.status}"), type=row.kind)
                failure.text = details
            elif _skip_reason(row):
                ElementTree.SubElement(case, "skipped", message=x(f"{row.metric}: {_skip_reason(row)}")).text = details
        if self.warnings:
            ElementTree.SubElement(suite, "system-err").text = "\n".join(
                x(f"selcal: warning: {model}: {text}", keep="") for model, text in self.warnings) + "\n"
        suites = ElementTree.Element("testsuites", name="selcal", tests=str(len(self.rows)),
                                     failures=str(len(self.failures)), errors="0", skipped=str(len(skipped)))
        suites.append(suite)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


_FEW_ROWS = 12  # up to this many judged rows are all shown; beyond, only those failed or close (or --all)


def _wrap(text: str, width: int | None) -> str:
    """A note wrapped to the console's width (100 columns in a CI log), continued indented."""
    import textwrap

    return textwrap.fill(text, width=min(width or 100, 100), subsequent_indent="  ", break_on_hyphens=False,
                         break_long_words=False)


def _skip_reason(row: Row) -> str | None:
    """Why a row that did not fail was not judged either (a JUnit ``<skipped>``), or None."""
    if row.failed:
        return None
    if row.status.startswith("worse, no interval"):
        return "worse than the baseline, but the files have no interval for this metric; give a --tolerance to judge it"
    if row.status.startswith("undefined"):
        return f"{row.status}: the value is null (e.g. AUROC without errors), so it cannot be judged"
    return None


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.4g}"


def _fmt_ci(ci) -> str:
    return "-" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _unit(key: str, value, signed: bool = False) -> str:
    """A value in the unit of the evaluate table: percent with two decimals for a fraction shown
    in percent there (``AURC (%)``), else four decimals.

    >>> _unit("msp.aurc", 0.00953), _unit("nll", 0.41212), _unit("accuracy", -0.0003, True)
    ('0.95', '0.4121', '-0.03')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    sign = "+" if signed else ""
    if catalog.unit(key) == "pct":
        return f"{100 * value:{sign}.2f}"
    return f"{value:{sign}.4f}" if abs(value) < 1e6 else f"{value:{sign}.4g}"


def _unit_ci(key: str, ci) -> str:
    return "-" if ci is None else f"[{_unit(key, ci[0])}, {_unit(key, ci[1])}]"


def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.2g}" if p >= 1e-4 else "<0.0001"


# ----------------------------------------------------------------------------- check
def _worse_by(better_direction: str, reference: float, value: float) -> float:
    return value - reference if better_direction == "lower" else reference - value


def _judge(metric: Metric, base: Metric, tolerance: float | None, bootstrapped: bool) -> tuple[str, bool]:
    """The rule of the module docstring for one metric present in both files.

    ``tolerance`` None: no --tolerance names the metric (0 applies); ``bootstrapped``: both
    files carry intervals, so a metric without an interval in either is judged only when a
    tolerance names it.
    """
    if base.value is None or metric.value is None:
        return ("undefined in both" if base.value is None and metric.value is None else "undefined in one"), False
    direction = better(metric.metric)
    worse_by = _worse_by(direction, base.value, metric.value)
    if worse_by < 0:
        return "better", False
    if worse_by == 0:
        return "same", False
    if worse_by <= (tolerance or 0.0):
        return "worse, within tolerance", False
    if base.ci is not None and metric.ci is not None:
        return "worse, within noise", False  # until Holm's procedure over every judged metric says otherwise
    if bootstrapped and tolerance is None:
        return "worse, no interval: give a --tolerance", False
    return "REGRESSION", True


_SAME_DEFINITIONS = catalog.definition_options()  # options that change what a metric means


def check(current: dict[str, Any], baseline: dict[str, Any] | None = None, *,
          tolerances: Sequence[tuple[Spec, float]] = (), maxima: Sequence[tuple[Spec, float]] = (),
          minima: Sequence[tuple[Spec, float]] = (), only: Sequence[Spec] = (),
          current_path: str = "CURRENT", baseline_path: str = "BASELINE", all_metrics: bool = False,
          allow_other_data: bool = False) -> Report:
    """Judge a result (loaded with :func:`load_result`) against a baseline and/or bounds.

    Against a baseline, the judged metrics are ``only`` when given, every metric with
    ``all_metrics``, else the primary ones (:func:`primary_metrics`) and those a ``--tolerance``
    names (not ``*``). ``allow_other_data``
    judges a baseline evaluated on other rows (refused otherwise)."""
    if baseline is None and not maxima and not minima:
        raise SelcalError("nothing to check: give --baseline BASELINE.json and/or --max/--min bounds")
    models = {m["name"]: m for m in current["models"]}
    current_metrics = [m for model in current["models"] for m in metrics_of(model).values()]
    _require_matches([s for s, _ in maxima], current_metrics, "--max", current_path)
    _require_matches([s for s, _ in minima], current_metrics, "--min", current_path)
    _require_matches(only, current_metrics, "--metric", current_path)
    if not baseline and tolerances:
        raise SelcalError("--tolerance needs --baseline BASELINE.json to compare against")

    def wanted(metric: Metric, primary: tuple[str, ...]) -> bool:
        if only:
            return any(spec.matches(metric) for spec in only)
        named = any(spec.metric is not None and spec.matches(metric) for spec, _ in tolerances)
        return all_metrics or named or metric.name in primary

    rows: list[Row] = []
    notes: list[str] = []
    confidence = None
    if baseline is not None:
        _require_matches([s for s, _ in tolerances], current_metrics, "--tolerance", current_path)
        pairs = _pairs(current, baseline, current_path, baseline_path)
        _check_same_data(pairs, current, baseline, current_path, baseline_path, allow_other_data, notes)
        renamed = [f"{b['name']} -> {m['name']}" for b, m in pairs if b["name"] != m["name"]]
        if renamed:
            notes.append(f"one model in each file, compared whatever its name: {renamed[0]}")
        levels = {path: (data.get("bootstrap") or {}).get("confidence")
                  for path, data in ((current_path, current), (baseline_path, baseline))}
        without = [path for path, level in levels.items() if level is None]
        if without:
            notes.append(f"no bootstrap intervals in {' and '.join(without)}: any worsening beyond the tolerance "
                         "counts (evaluate with --bootstrap 1000 to discount noise)")
        elif levels[current_path] != levels[baseline_path]:
            notes.append(f"the intervals have different levels ({100 * levels[current_path]:g}% current, "
                         f"{100 * levels[baseline_path]:g}% baseline)")
        confidence = levels[current_path] or levels[baseline_path]
        for base_model, model in pairs:
            ours = metrics_of(model)
            primary = primary_metrics(base_model)
            for name, base in metrics_of(base_model).items():
                if name not in ours:
                    raise SelcalError(
                        f"{current_path}: model '{model['name']}' has no {name}, which {baseline_path} has; "
                        "evaluate with the same --scores/--risks/--coverages as the baseline, or regenerate it")
                metric = ours[name]
                if not wanted(metric, primary):
                    continue
                tolerance = _most_specific(tolerances, metric)
                status, failed = _judge(metric, base, tolerance, bootstrapped=not without)
                difference = None if metric.value is None or base.value is None else metric.value - base.value
                p_value = None
                if base.ci is not None and metric.ci is not None and None not in (base.value, metric.value):
                    p_value = gate.interval_pvalue(_worse_by(better(metric.metric), base.value, metric.value),
                                                   metric.ci, base.ci, confidence or 0.95, tolerance or 0.0)
                rows.append(Row(model["name"], name, better(metric.metric), "baseline", base.value, metric.value,
                                difference, ci_reference=base.ci, ci_value=metric.ci, tolerance=tolerance or 0.0,
                                status=status, failed=failed, p_value=p_value))
        _apply_holm(rows, confidence or 0.95, "REGRESSION")
        notes.append(_family_note(rows, confidence or 0.95, only, all_metrics))
        unmatched = [n for n in models if n not in {m["name"] for _, m in pairs}]
        if unmatched:
            notes.append(f"not in the baseline, only bounds checked: {', '.join(unmatched)}")
    for kind, bounds in (("max", maxima), ("min", minima)):
        for spec, bound in bounds:
            for metric in current_metrics:
                if not spec.matches(metric):
                    continue
                if metric.value is None:
                    status, failed = "undefined: bound not shown", True
                else:
                    failed = metric.value > bound if kind == "max" else metric.value < bound
                    status = ("above max" if kind == "max" else "below min") if failed else "within bound"
                rows.append(Row(metric.model, metric.name, better(metric.metric), kind, bound, metric.value,
                                None if metric.value is None else metric.value - bound, ci_value=metric.ci,
                                status=status, failed=failed))
    sources = {"current": current_path}
    if baseline is not None:
        sources["baseline"] = baseline_path
    warnings = [(model["name"], str(text)) for model in current["models"]
                for text in (model.get("warnings") if isinstance(model.get("warnings"), list) else [])]
    return Report("check", rows, sources, CHECK_RULE, confidence, notes, warnings)


def _pairs(current, baseline, current_path, baseline_path) -> list[tuple[dict, dict]]:
    """(baseline model, current model) pairs: by name, or the only model of each file."""
    if len(current["models"]) == 1 and len(baseline["models"]) == 1:
        return [(baseline["models"][0], current["models"][0])]
    models = {m["name"]: m for m in current["models"]}
    for base_model in baseline["models"]:
        if base_model["name"] not in models:
            raise SelcalError(
                f"{current_path}: has no model '{base_model['name']}', which {baseline_path} has "
                f"(current models: {', '.join(sorted(models))}); evaluate the same files, or regenerate the baseline")
    return [(base_model, models[base_model["name"]]) for base_model in baseline["models"]]


def primary_metrics(model: dict[str, Any]) -> tuple[str, ...]:
    """The metrics the gate judges by default: accuracy, the AURC of the first score evaluated
    and the ECE of the first score that has one (usually the same, ``msp``).

    >>> primary_metrics({"scores": {"max_logit": {"aurc": 0.1}, "msp": {"aurc": 0.1, "ece": 0.02}}})
    ('accuracy', 'max_logit.aurc', 'msp.ece')
    """
    scores = [name for name, values in model["scores"].items() if isinstance(values, dict)]
    out = ["accuracy"]
    out += [f"{name}.aurc" for name in scores if "aurc" in model["scores"][name]][:1]
    out += [f"{name}.ece" for name in scores if "ece" in model["scores"][name]][:1]
    return tuple(out)


def _apply_holm(rows: list[Row], confidence: float, failed_status: str) -> None:
    """Holm's procedure over the rows that have a p-value: a rejected row that is worse by more
    than its tolerance fails (``failed_status``)."""
    tested = [row for row in rows if row.p_value is not None]
    for row, rejected in zip(tested, gate.holm([row.p_value for row in tested], gate.alpha_of(confidence))):
        if rejected and row.value is not None and row.reference is not None \
                and _worse_by(row.better, row.reference, row.value) > (row.tolerance or 0.0):
            row.status, row.failed = failed_status, True


def _family_note(rows: list[Row], confidence: float, only, all_metrics: bool) -> str:
    chosen = "--metric" if only else "--all" if all_metrics else "the primary metrics (--metric or --all for others)"
    tested = sum(1 for row in rows if row.p_value is not None)
    if not tested:
        return f"judged: {chosen}"
    return (f"judged: {chosen}; a regression must be significant after Holm's correction over the "
            f"{tested} tested metric{'s' if tested != 1 else ''}: at most {100 * gate.alpha_of(confidence):g}% "
            "chance that a model that is not worse fails")


def _check_same_data(pairs, current, baseline, current_path, baseline_path, allow_other_data=False,
                     notes=None) -> None:
    """Refuse (SelcalError) a baseline of other data or other metric definitions."""
    from .common_ground import other_data_message

    for base_model, model in pairs:
        other = other_data_message(model, base_model, current_path, baseline_path)
        if other and not allow_other_data:
            raise SelcalError(other)
        if other:
            notes.append(f"--allow-other-data: '{model['name']}' is judged against a baseline evaluated on other data")
            continue
        for key in ("num_classes", "n_eval", "split"):
            if key in base_model and key in model and base_model[key] != model[key] and not allow_other_data:
                raise SelcalError(
                    f"{current_path}: model '{model['name']}' has {key} = {model[key]!r} but {baseline_path} has "
                    f"{base_model[key]!r}: these are different data sets; evaluate the same dump or regenerate the baseline")
    options, base_options = current.get("options") or {}, baseline.get("options") or {}
    for key in _SAME_DEFINITIONS:
        if key in options and key in base_options and options[key] != base_options[key]:
            raise SelcalError(f"{current_path}: was evaluated with {key} = {options[key]!r} but {baseline_path} with "
                              f"{base_options[key]!r}; the metrics differ in meaning: use the baseline's options")


# --------------------------------------------------------------------------- compare
def compare(model_a, model_b, differences: dict[str, dict[str, dict]], *,
            tolerances: Sequence[tuple[Spec, float]] = (), only: Sequence[Spec] = (),
            path_a: str = "A", path_b: str = "B", confidence: float | None = None,
            resamples: int | None = None, seed: int | None = None, all_metrics: bool = False) -> Report:
    """Verdicts from :func:`selcal.bootstrap.paired_differences` (model_a/model_b: ModelResult):
    the metrics ``only``, or every one with ``all_metrics``, else the primary ones."""
    rows: list[Row] = []
    metrics = []
    # The order of the JSON: model level, then each score's metrics as evaluate lists them.
    order = {"model": list(differences.get("model", {}))}
    order.update({name: list(model_a.scores.get(name, {})) for name in model_a.scores})
    levels = [level for level in order if level in differences] + [lv for lv in differences if lv not in order]
    for level in levels:
        values = differences[level]
        keys = [k for k in order.get(level, []) if k in values] + [k for k in values if k not in order.get(level, [])]
        for key in keys:
            entry = values[key]
            if better(key) is None:
                continue
            name = key if level == "model" else f"{level}.{key}"
            metric = Metric(model_b.name, name, None if level == "model" else level, key, entry["b"], None)
            metrics.append((metric, entry))
    _require_matches(only, [m for m, _ in metrics], "--metric", "the comparison")
    _require_matches([s for s, _ in tolerances], [m for m, _ in metrics], "--tolerance", "the comparison")
    primary = primary_metrics({"scores": model_a.scores})
    for metric, entry in metrics:
        if only and not any(spec.matches(metric) for spec in only):
            continue
        if not only and not all_metrics and metric.name not in primary:
            continue
        direction = better(metric.metric)
        tolerance = _most_specific(tolerances, metric) or 0.0
        ci = entry["ci"]
        p_value = None
        if entry["difference"] is None or ci is None:
            status = "undefined"
        else:
            resampled = entry.get("resampled")
            if resampled is not None:
                p_value = gate.paired_pvalue(resampled if direction == "lower" else -resampled, tolerance)
            worse = ci[0] > 0 if direction == "lower" else ci[1] < 0
            improved = ci[1] < 0 if direction == "lower" else ci[0] > 0
            if worse:
                within = _worse_by(direction, entry["a"], entry["b"]) <= tolerance
                status = "worse, within tolerance" if within else "worse, within noise"
            else:
                status = "better" if improved else "no significant difference"
        rows.append(Row(f"{model_a.name} -> {model_b.name}", metric.name, direction, "compare", entry["a"], entry["b"],
                        entry["difference"], ci_difference=ci, tolerance=tolerance, status=status,
                        p_value=p_value))
    _apply_holm(rows, confidence or 0.95, "WORSE")
    clusters = getattr(model_a, "clusters", None)
    unit = (f"the same {int(np.unique(clusters).size)} images ({model_a.n_eval} evaluation pixels, resampled by "
            f"whole image)" if clusters is not None else f"the same {model_a.n_eval} evaluation rows")
    notes = [f"paired bootstrap: {resamples} resamples of {unit}, seed {seed}",
             _family_note(rows, confidence or 0.95, only, all_metrics)]
    if all_metrics:
        notes.append("class-wise ECE has no interval (not a mean over rows) and is not compared")
    tested = sum(1 for row in rows if row.p_value is not None)
    if resamples and tested and 1 / (resamples + 1) > gate.alpha_of(confidence or 0.95) / tested:
        needed = math.ceil(tested / gate.alpha_of(confidence or 0.95)) - 1
        notes.append(f"with {resamples} resamples the smallest p-value is 1/{resamples + 1}: too coarse for Holm "
                     f"over {tested} metrics, so none can fail; give --bootstrap {needed} or more")
    warnings = [(model.name, text) for model in (model_a, model_b) for text in model.warnings]
    return Report("compare", rows, {"a": path_a, "b": path_b}, COMPARE_RULE, confidence, notes, warnings)


def _align(a, b, allow_other_data: bool = False) -> np.ndarray:
    """Indices into b's rows that put them in a's order (by id when both have ids, else by position).

    Other data (other ids, other labels) is refused, unless ``allow_other_data``: rows are then
    paired by position when the ids differ, and their labels are not compared."""
    if allow_other_data and len(a) == len(b) and (a.ids is None or b.ids is None
                                                  or not np.array_equal(np.sort(a.ids), np.sort(b.ids))):
        return np.arange(len(b))
    if a.ids is not None and b.ids is not None:
        for dump in (a, b):
            values, counts = np.unique(dump.ids, return_counts=True)
            if values.size != dump.ids.size:
                raise SelcalError(f"{dump.path}: column 'id' has duplicate values (e.g. '{values[counts > 1][0]}'); "
                                  "compare aligns rows by id, so ids must be unique")
        only_a, only_b = np.setdiff1d(a.ids, b.ids), np.setdiff1d(b.ids, a.ids)
        if only_a.size or only_b.size:
            example = f"'{only_a[0]}' only in A" if only_a.size else f"'{only_b[0]}' only in B"
            raise SelcalError(f"{b.path}: its evaluation rows are not those of {a.path} ({only_a.size} ids only in A, "
                              f"{only_b.size} only in B, e.g. {example}); compare needs the same evaluation rows "
                              "(or give --allow-other-data)")
        order = np.argsort(b.ids, kind="stable")
        rows = order[np.searchsorted(b.ids[order], a.ids)]
        where = lambda i: f"id '{a.ids[i]}'"  # noqa: E731
    else:
        if len(a) != len(b):
            raise SelcalError(f"{b.path}: has {len(b)} evaluation rows but {a.path} has {len(a)}; compare needs the "
                              "same rows (add an 'id' column to both files to align them by id)")
        rows = np.arange(len(b))
        where = lambda i: f"row {i}"  # noqa: E731
    mismatch = np.flatnonzero(b.labels[rows] != a.labels)
    if mismatch.size and not allow_other_data:
        i = int(mismatch[0])
        raise SelcalError(f"{b.path}: {where(i)} has label {int(b.labels[rows][i])} but {a.path} has "
                          f"{int(a.labels[i])} ({mismatch.size} labels differ): different data sets; compare needs the "
                          "same evaluation rows, in the same order or with an 'id' column (or give --allow-other-data)")
    return rows


def labels_differ(a, b) -> bool:
    return len(a) != len(b) or bool(np.any(a.labels != b.labels))


def _evaluation_pair(a, b, val_a, val_b, options, allow_other_data: bool = False):
    """(val_a, eval_a, val_b, eval_b, rule) with the same evaluation rows for both, in a's order."""
    from .pipeline.split import holdout_mask, split_rows

    fit_a, eval_a, rule_a = split_rows(a, val_a, options)
    fit_b, eval_b, rule_b = split_rows(b, val_b, options)
    if rule_a != rule_b and {rule_a, rule_b} != {"split-column", "split-names"}:
        raise SelcalError(f"{b.path}: its validation rows are chosen by '{rule_b}' but {a.path}'s by '{rule_a}'; "
                          "give both a split column, or --val for both, so both are evaluated on the same rows")
    if rule_a == "holdout":
        # One hold-out for both: A's (seeded, by row identity), applied to B's rows aligned to A's.
        rows = _align(a, b, allow_other_data)
        mask = holdout_mask(len(a), a.ids, options.val_fraction, options.seed)
        b = b.subset(rows)
        return a.subset(mask), a.subset(~mask), b.subset(mask), b.subset(~mask), rule_a
    return fit_a, eval_a, fit_b, eval_b.subset(_align(eval_a, eval_b, allow_other_data)), rule_a


def compare_files(path_a, path_b, *, val: Sequence | None = None, options=None, label_col: str | None = None,
                  logits_col: str | None = None, ignore_label: int | None = None, resamples: int = 1000,
                  seed: int = 0, confidence: float = 0.95, tolerances: Sequence[tuple[Spec, float]] = (),
                  only: Sequence[Spec] = (), progress=None, pixels_per_image: int | None = None,
                  input_kind: str | None = None, ood_label: int | None = None,
                  all_metrics: bool = False, allow_other_data: bool = False) -> Report:
    """``selcal compare``: evaluate two dumps on the same rows and judge B - A with paired intervals.

    ``input_kind`` and ``ood_label`` as for ``selcal evaluate`` (``--input``, ``--ood-label``).
    ``allow_other_data``: pair the rows by position even when their labels (or ids) differ
    (refused otherwise), as long as both have as many.

    ``progress(done, total)``: paired resamples done (for a progress bar)."""
    from .bootstrap import paired_differences
    from .options import Options
    from .pipeline.measure import measure_arrays
    from .io import read_dump

    options = options or Options()
    val = list(val or [])
    if val and len(val) != 2:
        raise SelcalError(f"compare takes --val twice (A's, then B's) or not at all; got {len(val)}")

    def read(path):
        return read_dump(str(path), label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                         seed=options.seed, pixels_per_image=pixels_per_image,  # (segmentation folders: the draw)
                         input_kind=input_kind, ood_label=ood_label)

    a, b = read(path_a), read(path_b)
    dropped = []
    for dump in (a, b):  # a file of probabilities: the scores that need raw logits are compared for neither
        if dump.input != "logits":
            from .evaluate import scores_for_input

            options, more = scores_for_input(options, dump.input, dump.path)
            dropped += [name for name in more if name not in dropped]
    if a.num_classes != b.num_classes:
        raise SelcalError(f"{b.path}: has K = {b.num_classes} classes but {a.path} has K = {a.num_classes}: "
                          "different data sets cannot be compared")
    val_a, val_b = (read(val[0]), read(val[1])) if val else (None, None)
    fit_a, eval_a, fit_b, eval_b, rule = _evaluation_pair(a, b, val_a, val_b, options, allow_other_data)
    name_a, name_b = Path(str(path_a)).stem, Path(str(path_b)).stem
    if name_a == name_b:
        name_a, name_b = str(path_a), str(path_b)

    def evaluate(fit, rows, name, dump):
        return measure_arrays(rows.logits, rows.labels, None if fit is None else fit.logits,
                               None if fit is None else fit.labels, options=options, name=name, path=dump.path,
                               split=rule, extra={"input": dump.input} if dump.input != "logits" else None,
                               clusters=eval_a.images)  # pixel rows: A's images, so both resample the same ones

    model_a = evaluate(fit_a, eval_a, name_a, a)
    model_b = evaluate(fit_b, eval_b, name_b, b)
    differences = paired_differences(model_a, model_b, resamples=resamples, seed=seed, confidence=confidence,
                                     options=options, progress=progress)
    report = compare(model_a, model_b, differences, tolerances=tolerances, only=only, path_a=a.path, path_b=b.path,
                     confidence=confidence, resamples=resamples, seed=seed, all_metrics=all_metrics)
    if (eval_a.ids is None or eval_b.ids is None) and eval_a.images is None:  # (pixels: by image and position)
        report.notes.append("rows aligned by their order in the files (no 'id' column in both): row i of A is "
                            "taken to be row i of B")
    if labels_differ(eval_a, eval_b):
        report.notes.append("--allow-other-data: the two models' rows hold other labels; the comparison is not "
                            "on the same data")
    if rule == "holdout":
        report.notes.append("one random hold-out (A's) is used for both models, so both are evaluated on the same rows")
    if dropped:
        report.notes.append(f"not compared: {', '.join(dropped)} (a file holds probabilities; they need raw logits)")
    return report
