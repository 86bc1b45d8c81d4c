"""Write the documentation's generated references from the code itself, so they cannot go stale.

    python docs/generate.py          # (re)write docs/reference/
    python docs/generate.py --check  # exit 1 when a generated page differs from what is committed

* ``reference/cli.md``: every command and every option of the live Typer app (its click objects:
  names, metavar, choices, default, help), grouped by the help panels the commands declare;
* ``reference/scores/<name>.md`` and ``reference/scores/index.md``: one page per entry of the score
  registry (its description, what it needs, the options its fit reads) with its definition taken from
  ``docs/CONVENTIONS.md``;
* ``reference/metrics/<key>.md`` and ``reference/metrics/index.md``: one page per entry of the metric
  catalog (label, unit, direction, interval, level, the options that change it) with its definition
  from ``docs/CONVENTIONS.md``.

It also writes the output of every command shown in README.md and the docs: a block

    <!-- output: selcal ARGS -->
    ```text
    ...
    ```

holds what ``selcal ARGS`` prints (in-process, 100 columns, no colour, run in a scratch folder that
sees the repository's ``sample_logits/``), so no output shown can go stale.

``tests/docs/test_docs.py`` runs :func:`pages` and :func:`shown_outputs` and compares, and checks that every
command, option, score and metric has its place.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OUTPUT_BLOCK = re.compile(r"(<!-- output: selcal (?P<args>[^>]*?) -->\n```text\n)(?P<text>.*?)(\n```)", re.S)
REFERENCE = DOCS / "reference"
SPEC_END = "# selcal's decisions"  # the conventions' definitions stand before this heading


def _conventions() -> str:
    text = (DOCS / "CONVENTIONS.md").read_text()
    return text.split(SPEC_END)[0]


def definition(name: str) -> str | None:
    """The conventions' bullet that defines ``name`` (the first bullet naming it in code: `` `name` ``)."""
    wanted = {"cov@": "cov@r", "risk@": "risk@c"}.get(name, name)
    bullets = re.split(r"\n(?=- )", _conventions())
    head = re.compile(rf"^- `{re.escape(wanted)}`")  # a bullet that starts with the name defines it
    term = re.compile(rf"`{re.escape(wanted)}`(?: =|:| \()")  # else one that says `name` = ...
    for pattern in (head, term):
      for bullet in bullets:
        bullet = bullet.split("\n\n")[0].split("\n#")[0]
        if bullet.startswith("- ") and pattern.search(bullet):
            return re.sub(r"\n\s+", "\n", bullet[2:].strip())
    return None


def _md(text: str) -> str:
    """Plain text in a Markdown table cell."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
            .replace("\n", " "))


# ------------------------------------------------------------------------------------------- CLI


def _cli_pages() -> dict[str, str]:
    import typer

    from selcal.cli import app

    group = typer.main.get_command(app)
    lines = ["# Command-line reference", "",
             "Generated from the commands themselves (`docs/generate.py`); `selcal COMMAND --help` prints the same.", ""]
    for name, command in group.commands.items():
        if command.hidden:
            continue
        usage = " ".join(["[OPTIONS]", *(_usage(p) for p in command.params if _is_argument(p))])
        lines += [f"## selcal {name}", "", "```console", f"selcal {name} {usage}", "```", ""]
        help_text = (command.help or "").strip()
        if help_text:
            lines += [inspect_clean(help_text), ""]
        panels: dict[str, list] = {}
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            panels.setdefault(getattr(param, "rich_help_panel", None) or
                              ("Arguments" if _is_argument(param) else "Options"), []).append(param)
        for panel, params in panels.items():
            lines += [f"### {panel}", "", "| option | default | meaning |", "|---|---|---|"]
            for param in params:
                lines.append(f"| {_md(_param_name(param))} | {_md(_default(param))} | {_md(_param_help(param))} |")
            lines.append("")
    return {"cli.md": "\n".join(lines).rstrip() + "\n"}


def inspect_clean(text: str) -> str:
    import inspect

    return inspect.cleandoc(text).split("\f")[0]


def _is_argument(param) -> bool:
    return param.param_type_name == "argument"


def _usage(param) -> str:
    text = param.metavar or param.name.upper()
    text += " ..." if param.nargs == -1 else ""
    return text if param.required else f"[{text}]"


def _param_name(param) -> str:
    if _is_argument(param):
        return f"`{_usage(param)}`"
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    metavar = _choices(param) or param.metavar
    return names + (f" `{metavar}`" if metavar and not getattr(param, "is_flag", False) else "")


def _choices(param) -> str | None:
    choices = getattr(getattr(param, "type", None), "choices", None)
    return "|".join(str(c) for c in choices) if choices else None


def _default(param) -> str:
    if _is_argument(param):
        return "(required)" if param.required else ""
    if param.required:
        return "(required)"
    default = param.default
    if callable(default) or default is None or default == () or default == []:
        return ""
    flag = getattr(param, "is_flag", False)
    if flag and param.secondary_opts:
        return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
    if flag:
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        default = ",".join(str(d) for d in default)
    return f"`{default}`"


def _param_help(param) -> str:
    text = getattr(param, "help", None) or ""
    choices = _choices(param)
    if choices and choices.replace("|", ", ") not in text:
        text += f" (one of: {choices.replace('|', ', ')})"
    return text.strip()


# ---------------------------------------------------------------------------------------- scores


def _score_pages() -> dict[str, str]:
    from selcal.scores import REGISTRY

    pages, rows = {}, []
    for name, entry in REGISTRY.items():
        display = entry.display
        label = display.label or name
        facts = [
            ("needs validation rows (a fit)", "yes" if entry.needs_fit else "no"),
            ("probabilities (calibration metrics apply)", "yes" if entry.has_probabilities else "no"),
            ("reads the logits' scale (not on probabilities)", "yes" if entry.raw_logits else "no"),
            ("its own predictions (a calibrator)", "yes" if entry.has_probabilities and entry.own_predictions
             and not getattr(entry, "model_probabilities", False) else "no"),
            ("options its fit or values read", ", ".join(f"`--{o.replace('_', '-')}`" for o in entry.options) or "none"),
            ("in `--scores all`", "yes" if entry.in_all else "no"),
            ("groups", ", ".join(f"`{g}`" for g in entry.groups) or "none"),
            ("reproducible", "to a relative {:g} across releases (a library solver)".format(entry.reproducible_to)
             if getattr(entry, "reproducible_to", None) else "exactly, byte for byte"),
        ]
        text = [f"# `{name}`: {label}", "", display.description + ".", ""]
        spec = definition(name)
        if spec:
            text += ["## Definition", "", spec, "",
                     "From [the conventions](../../CONVENTIONS.md), which also give every decision taken.", ""]
        text += ["## Properties", "", "| property | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in facts], "",
                 f"Evaluate it with `selcal evaluate FILE --scores {name}`.", ""]
        pages[f"scores/{name}.md"] = "\n".join(text)
        rows.append(f"| [`{name}`]({name}.md) | {_md(display.description)} | {'yes' if entry.needs_fit else 'no'} | "
                    f"{'yes' if entry.has_probabilities else 'no'} |")
    pages["scores/index.md"] = "\n".join([
        "# Scores", "", "Every confidence score selcal computes, from the score registry "
        "(`selcal/scores/`). Higher means more confident.", "",
        "| score | what it is | fitted | probabilities |", "|---|---|---|---|", *rows, ""])
    return pages


# --------------------------------------------------------------------------------------- metrics


def _metric_pages() -> dict[str, str]:
    from selcal.metrics.catalog import CATALOG

    pages, rows = {}, []
    for key, metric in CATALOG.items():
        slug = key.rstrip("@") + ("_at" if metric.family else "")
        direction = {True: "lower is better", False: "higher is better", None: "no direction (shown, never judged)"}
        unit = "a fraction (tables show percent)" if metric.unit == "pct" else "a number"
        shown = f"`{key}<value>` (e.g. `{key}0.05`), one key per value of its option" if metric.family else f"`{key}`"
        facts = [
            ("JSON key", shown), ("name in tables", _md(metric.label.format("r") if metric.family else metric.label)),
            ("unit", unit), ("direction", direction[metric.lower_is_better]),
            ("bootstrap interval", "yes" if metric.interval else "no"),
            ("reported", " and ".join(f"per {level}" for level in metric.levels)),
            ("options that change it", ", ".join(f"`--{o.replace('_', '-')}`" for o in metric.options) or "none"),
            ("needs every class's logit", "yes (not for a file of confidences)" if metric.needs_logits else "no"),
        ]
        text = [f"# `{key}`: {metric.label.format('…') if metric.family else metric.label}", ""]
        spec = definition(key)
        if spec:
            text += ["## Definition", "", spec, "",
                     "From [the conventions](../../CONVENTIONS.md), which also give every decision taken.", ""]
        text += ["## Properties", "", "| property | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in facts], ""]
        pages[f"metrics/{slug}.md"] = "\n".join(text)
        rows.append(f"| [`{key}`]({slug}.md) | {_md(metric.label.format('r') if metric.family else metric.label)} | "
                    f"{direction[metric.lower_is_better]} | {'%' if metric.unit == 'pct' else 'number'} |")
    pages["metrics/index.md"] = "\n".join([
        "# Metrics", "", "Every metric selcal reports, from the metric catalog (`selcal/metrics/catalog.py`).", "",
        "| key | name | direction | unit |", "|---|---|---|---|", *rows, ""])
    return pages


# --------------------------------------------------------------------------- outputs shown in the docs


def run_shown(args: str) -> str:
    """What ``selcal ARGS`` prints, as a reader would see it in a 100-column terminal."""
    from typer.testing import CliRunner

    from selcal.cli import app

    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.symlink(ROOT / "sample_logits", Path(scratch) / "sample_logits")
        os.chdir(scratch)
        try:
            result = CliRunner().invoke(app, shlex.split(args), terminal_width=100,
                                        env={"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"})
        finally:
            os.chdir(here)
    if result.exit_code not in (0, 1):
        raise SystemExit(f"selcal {args}: exit {result.exit_code}\n{result.output}")
    return result.stdout.rstrip("\n")


def documents() -> list[Path]:
    """The files whose shown outputs are generated: README.md and every page of the docs."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def shown_outputs() -> dict[Path, str]:
    """Every document with an output block, its text with each block's output as the code prints it now."""
    done = {}
    for path in documents():
        text = path.read_text(encoding="utf-8")
        if OUTPUT_BLOCK.search(text):
            done[path] = OUTPUT_BLOCK.sub(lambda m: m.group(1) + run_shown(m.group("args")) + m.group(4), text)
    return done


def pages() -> dict[str, str]:
    """Every generated page: path under docs/reference/ -> its text."""
    return {**_cli_pages(), **_score_pages(), **_metric_pages()}


def main(argv: list[str]) -> int:
    wanted = pages()
    if "--check" in argv:
        stale = [p for p, text in wanted.items() if not (REFERENCE / p).is_file() or (REFERENCE / p).read_text() != text]
        extra = [str(p.relative_to(REFERENCE)) for p in REFERENCE.rglob("*.md")
                 if str(p.relative_to(REFERENCE)) not in wanted and p.name != "api.md"]
        outputs = [p for p, text in shown_outputs().items() if p.read_text(encoding="utf-8") != text]
        for p in stale + extra:
            print(f"docs/reference/{p} is stale: run python docs/generate.py", file=sys.stderr)
        for p in outputs:
            print(f"{p.relative_to(ROOT)} shows an output that changed: run python docs/generate.py", file=sys.stderr)
        return 1 if stale or extra or outputs else 0
    for path, text in wanted.items():
        target = REFERENCE / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for p in REFERENCE.rglob("*.md"):
        if str(p.relative_to(REFERENCE)) not in wanted and p.name != "api.md":
            p.unlink()
    for path, text in shown_outputs().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
