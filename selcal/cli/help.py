"""``--help`` in panels, drawn with rich's console, panel and table only.

The panels and their order are declared in :mod:`selcal.cli.groups` (``PANELS``; each option carries
its panel's title as ``rich_help_panel``). Typer has a renderer of its own, but it imports rich's
Markdown and traceback modules (pygments among them), which took longer than the rest of the start:
``selcal --help`` must start within twice the time of ``import numpy, typer``
(``bench/bench_startup.py``).
"""

from __future__ import annotations

OPTIONS = "Options"  # the panel of an option no panel claims (the group's --version, --help, completion)


def render_help(command, ctx) -> None:
    """Print the help of ``command`` (a command or the ``selcal`` group) on stdout: the usage, the
    description, a panel of arguments, the option panels in their order, and the commands."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    import textwrap

    console = Console(highlight=False)  # the terminal's width; in a pipe, COLUMNS or 80
    console.print(Text(command.get_usage(ctx), style="bold"))
    for paragraph in (command.help or "").split("\n\n"):
        console.print()
        for line in textwrap.wrap(paragraph, width=console.width):
            console.print(Text(line))
    console.print()
    panels: dict[str, list] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        title = "Arguments" if param.param_type_name == "argument" else getattr(param, "rich_help_panel", None) or OPTIONS
        panels.setdefault(title, []).append((param, *record))
    if "Arguments" in panels:  # first, whatever the order of the parameters
        panels = {"Arguments": panels.pop("Arguments"), **panels}
    for title, rows in panels.items():
        table = Table.grid(padding=(0, 2), expand=True)
        table.add_column(no_wrap=True)
        table.add_column(ratio=1)
        for param, names, text in rows:
            table.add_row(_names(param, names), _help(text))
        console.print(Panel(table, title=title, title_align="left", border_style="dim"))
    commands: dict[str, list] = {}  # each command in the panel it is registered in, in its order
    for name in getattr(command, "list_commands", lambda c: [])(ctx):
        sub = command.get_command(ctx, name)
        commands.setdefault(getattr(sub, "rich_help_panel", None) or "Commands", []).append((name, sub))
    for title, rows in commands.items():
        table = Table.grid(padding=(0, 2), expand=True)
        table.add_column(no_wrap=True, style="bold cyan")
        table.add_column(ratio=1)
        for name, sub in rows:
            table.add_row(name, Text((sub.help or "").split("\n\n")[0]))
        console.print(Panel(table, title=title, title_align="left", border_style="dim"))


def _names(param, names: str):
    """The option's flags (bold), then the word for what it takes."""
    from rich.text import Text

    metavar = param.metavar if param.param_type_name == "option" and not getattr(param, "is_flag", False) else None
    if metavar and names.endswith(f" {metavar}"):
        return Text.assemble((names[: -len(metavar) - 1], "bold cyan"), " ", (metavar, "yellow"))
    return Text(names, style="bold cyan")


def _help(text: str):
    """The help, with its ``[default: ...]`` or ``[required]`` dimmed."""
    from rich.text import Text

    head, _, tail = text.rpartition("  [")
    if head and text.endswith("]") and tail.startswith(("default: ", "required")):
        return Text.assemble(head, "  ", ("[" + tail, "dim"))
    if text.startswith("[") and text.endswith("]"):
        return Text(text, style="dim")
    return Text(text)
