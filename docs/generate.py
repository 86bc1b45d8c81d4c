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

holds what ``selcal ARGS`` prints on stdout (in-process, 100 columns, no colour, run in a scratch folder
that sees the repository's ``sample_logits/``); a session block

    <!-- session -->                 or   <!-- session: python above -->   or   <!-- session: hf-dump -->
    ```console
    $ selcal ARGS                    # each `$ ` line is run in order, in one scratch folder
    ...                              # what it printed, stderr included, and `(exit status N)` when not 0
    ```

runs the commands it shows (a line ending in a backslash goes on; a pattern is expanded as a shell does;
``| head -n N`` and ``| grep [-A N] WORD`` filter), after a setup that writes prepared files there: the
page's nearest ``python`` block above it, or a function of :data:`SETUPS`. So no output shown can go stale.

``tests/docs/test_docs.py`` runs :func:`pages` and :func:`shown_outputs` and compares, and checks that every
command, option, score and metric has its place.
"""

from __future__ import annotations

import contextlib
import glob
import math
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
    from selcal.cli.groups import registry_help

    group = typer.main.get_command(app)
    lines = ["# Command-line reference", "",
             "Generated from the commands themselves (`docs/generate.py`); `selcal COMMAND --help` prints the same.", ""]
    for name, command in group.commands.items():
        if command.hidden:
            continue
        registry_help(command.params)  # (the score options' help names every registered score, as --help does)
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
    from selcal.cli.groups import usage_name

    return usage_name(param)  # as the command's usage line writes it


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


ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}  # what a reader's 100-column terminal gets
SESSION_BLOCK = re.compile(r"(<!-- session(?:: (?P<setup>[^>]*?))? -->\n```(?:text|console)\n)(?P<text>.*?)(\n```)", re.S)
PROMPT = "$ "


@contextlib.contextmanager
def _scratch():
    """An empty scratch folder as the working directory, which sees the repository's ``sample_logits/``."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.symlink(ROOT / "sample_logits", Path(scratch) / "sample_logits")
        os.chdir(scratch)
        try:
            yield Path(scratch)
        finally:
            os.chdir(here)


def _selcal(args: list[str]) -> tuple[str, str, int]:
    """What ``selcal ARGS`` prints (stdout; stdout and stderr as a terminal interleaves them) and its exit
    status, through the console entry point's own handling (one-line errors, status 2), in this process.
    Without the progress lines a long run prints in a pipe (their count depends on the machine's speed)
    and without the spaces that pad a table's last column (an editor would strip them)."""
    from typer.testing import CliRunner  # (Typer vendors Click: no click package in a fresh venv)

    from selcal import cli
    from selcal.cli import progress

    def text(stream) -> str:
        return "\n".join(line.rstrip() for line in stream.getvalue().decode().splitlines())

    argv, every = sys.argv, progress.PIPE_EVERY
    with CliRunner().isolation(env=ENV) as (stdout, _, both):
        sys.argv, progress.PIPE_EVERY = ["selcal", *args], math.inf
        try:
            code = cli._invoke()
        finally:
            sys.argv, progress.PIPE_EVERY = argv, every
        printed = text(stdout), text(both)  # (read inside: Typer's runner closes its streams on leaving)
    return *printed, code if isinstance(code, int) else 0


def run_shown(args: str) -> str:
    """What ``selcal ARGS`` prints on stdout, as a reader would see it in a 100-column terminal."""
    with _scratch():
        stdout, both, code = _selcal(shlex.split(args))
    if code not in (0, 1):
        raise SystemExit(f"selcal {args}: exit {code}\n{both}")
    return stdout.rstrip("\n")


# A session block runs its ``$ selcal ...`` lines in order in one scratch folder and shows each with what
# it printed (stderr included) and, when it is not 0, its exit status. ``<!-- session: SETUP -->`` first
# prepares files there: ``python above`` runs the page's nearest ``python`` block above the session (the
# code the reader is shown), another name a function of SETUPS.


def _hf_dump(page: str) -> None:
    """A Hugging Face dataset folder of the cross-entropy ResNet-50: its val and test rows as two parts."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table("sample_logits/calibrator_cifar10_resnet50_ce.parquet")
    Path("hf_dump/data").mkdir(parents=True)
    for split, name in (("val", "validation"), ("test", "test")):
        part = table.filter(pc.equal(table["split"], split)).drop_columns(["split"])
        pq.write_table(part, f"hf_dump/data/{name}-00000-of-00001.parquet")


def _python_above(page: str) -> None:
    """Run the last ``python`` block of ``page`` (the page's text up to the session)."""
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    if not blocks:
        raise SystemExit("a session with 'python above' has no python block above it")
    exec(compile(blocks[-1], "python block above a session", "exec"), {})  # noqa: S102


SETUPS = {"python above": _python_above, "hf-dump": _hf_dump}


def _commands(text: str) -> list[str]:
    """The commands of a session's text: its ``$ `` lines, a line ending in `` \\`` continued by the next."""
    commands, lines = [], iter(text.splitlines())
    for line in lines:
        if line.startswith(PROMPT):
            command = line
            while command.endswith("\\"):
                command += "\n" + next(lines, "")
            commands.append(command)
    return commands


def _piped(output: str, stage: str) -> str:
    """``output`` through one stage of a pipe, as the tool prints it: ``head -n N``, ``grep [-A N] WORD``."""
    words = re.sub(r"^(head -n|grep -A) ?(\d+)", r"\1 \2", stage.strip()).split()
    lines = output.splitlines()
    if words[:2] == ["head", "-n"] and len(words) == 3:
        return "\n".join(lines[:int(words[2])])
    if words[0] == "grep" and len(words) in (2, 4) and (len(words) == 2 or words[1] == "-A"):
        after = int(words[2]) if len(words) == 4 else 0
        keep = sorted({i + j for i, line in enumerate(lines) if words[-1] in line for j in range(after + 1)})
        return "\n".join(lines[i] for i in keep if i < len(lines))
    raise SystemExit(f"a session pipes into {stage!r}: only 'head -n N' and 'grep [-A N] WORD' are run")


def _expanded(word: str) -> list[str]:
    """A word of a command as the shell passes it: a pattern with matches is its matching paths, in order."""
    return sorted(glob.glob(word)) or [word] if glob.has_magic(word) else [word]


def run_session(text: str, setup: str | None = None, page: str = "") -> str:
    """A session's text with every command followed by what it prints now."""
    shown = []
    with _scratch() as scratch:
        for name in filter(None, (s.strip() for s in (setup or "").split(","))):
            if name not in SETUPS:
                raise SystemExit(f"a session names the setup {name!r}: not one of {', '.join(SETUPS)}")
            SETUPS[name](page)
        for command in _commands(text):
            line, *stages = command[len(PROMPT):].replace("\\\n", " ").split(" | ")
            words = shlex.split(line, comments=True)
            if words[0] != "selcal":
                raise SystemExit(f"a session runs {command!r}: only selcal commands are run")
            _, output, code = _selcal([path for word in words[1:] for path in _expanded(word)])
            for stage in stages:
                output = _piped(output, stage)
            for folder in sorted({str(scratch), os.path.realpath(scratch), str(ROOT)}, key=len, reverse=True):  # paths as the reader's own
                output = output.replace(f"{folder}/", "")
            output = output.rstrip("\n")
            shown += [command, *([output] if output else []), *([f"(exit status {code})"] if code else [])]
    return "\n".join(shown)


def documents() -> list[Path]:
    """The files whose shown outputs are generated: README.md and every page of the docs."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def shown_outputs() -> dict[Path, str]:
    """Every document with an output or session block, its text with each block's output as the code
    prints it now."""
    done = {}
    for path in documents():
        text = path.read_text(encoding="utf-8")
        if OUTPUT_BLOCK.search(text) or SESSION_BLOCK.search(text):
            text = OUTPUT_BLOCK.sub(lambda m: m.group(1) + run_shown(m.group("args")) + m.group(4), text)
            done[path] = SESSION_BLOCK.sub(lambda m: m.group(1) + run_session(
                m.group("text"), m.group("setup"), m.string[:m.start()]) + m.group(4), text)
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
