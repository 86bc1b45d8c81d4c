"""The verdict of a check or a comparison: its rows (:class:`Row`, :func:`is_close`) and
:class:`Report`, rendered as a terminal table, JSON, Markdown or JUnit XML."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any
from xml.etree import ElementTree

from ..metrics import catalog
from ..metrics.catalog import better


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
    p_value: float | None = None  # one-sided, of "not worse by more than the tolerance" (see selcal.checks.gate)
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
    worse_by = worsening(row.better, row.reference, row.value)
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
        from ..results import to_jsonable

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

        from ..escape import printable, terminal

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
            from ..report.table import measure_width

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
        from ..escape import code_span, markdown_text as md

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
        from ..escape import xml_text as x

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


def worsening(better_direction: str, reference: float, value: float) -> float:
    return value - reference if better_direction == "lower" else reference - value

