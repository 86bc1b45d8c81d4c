"""The runs of a study: each dump's recipe, seed and data set, from a path template
(``--pattern``) or a manifest (``--manifest``); the refusals of CONVENTIONS.md, "Studies".
Pure but for reading the manifest: paths in, :class:`Run` objects out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SelcalError, naming_flags, said
from ..escape import printable

__all__ = ["Run", "runs_from_pattern", "runs_from_manifest", "compile_pattern", "MANIFEST_COLUMNS"]

MANIFEST_COLUMNS = ("path", "recipe", "seed")  # required; optional: dataset, val, and any other (a column)
_FIELD = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INTEGER = re.compile(r"[+-]?\d+\Z")


@dataclass(frozen=True)
class Run:
    """One training run of a study: a dump and what it is.

    ``seed`` is an int when every run's seed is an integer, else text; ``dataset`` is None when
    the study has none; ``fields`` holds the other fields of the template or columns of the
    manifest (``{"arch": "resnet18"}``); ``val`` a validation dump of its own (a manifest's
    ``val`` column), else None.
    """

    path: str
    recipe: str
    seed: int | str
    dataset: str | None = None
    fields: dict = field(default_factory=dict, compare=False)
    val: str | None = None

    @property
    def key(self) -> tuple:
        """(data set, recipe, seed): what two runs of a study never share."""
        return (self.dataset, self.recipe, self.seed)

    def describe(self) -> str:
        where = f"data set '{self.dataset}', " if self.dataset is not None else ""
        return f"{where}recipe '{self.recipe}', seed {self.seed}"


def compile_pattern(pattern: str) -> tuple[re.Pattern, list[str]]:
    """A path template as a regular expression and its field names.

    ``{name}`` is a field: one or more characters, no ``/``; ``*`` is a wildcard (any
    characters but ``/``, possibly none); everything else is literal. The template matches a
    path as given, whole or from just after one of its ``/`` (``{recipe}_seed{seed}.pt``
    matches ``runs/ce_seed0.pt``). When several splits fit, the fields to the left are
    the shortest.

    >>> regex, names = compile_pattern("{dataset}/{recipe}_seed{seed}.parquet")
    >>> names, regex.match("runs/c10/ls_0.1_seed2.parquet").groupdict()
    (['dataset', 'recipe', 'seed'], {'dataset': 'c10', 'recipe': 'ls_0.1', 'seed': '2'})
    """
    if not isinstance(pattern, str) or not pattern.strip():
        raise SelcalError(f"{said('pattern')} needs a template, e.g. '{{dataset}}/{{recipe}}_seed{{seed}}.parquet'")
    names: list[str] = []
    parts = []
    position = 0
    for match in _FIELD.finditer(pattern):
        parts.append(_literal(pattern[position:match.start()], pattern))
        name = match.group(1)
        if not _NAME.match(name):
            raise SelcalError(f"{said('pattern')} {printable(pattern)}: '{{{printable(name)}}}' is not a field name "
                              "(letters, digits and _, e.g. {recipe})")
        if name in names:
            raise SelcalError(f"{said('pattern')} {printable(pattern)}: the field {{{name}}} appears twice")
        names.append(name)
        parts.append(f"(?P<{name}>[^/]+?)")
        position = match.end()
    parts.append(_literal(pattern[position:], pattern))
    for required in ("recipe", "seed"):
        if required not in names:
            raise SelcalError(f"{said('pattern')} {printable(pattern)}: has no {{{required}}} field; a study needs "
                              "each run's recipe and seed, e.g. '{recipe}_seed{seed}.parquet'")
    return re.compile("(?:.*/)?" + "".join(parts) + r"\Z", re.DOTALL), names


def _literal(text: str, pattern: str) -> str:
    if "{" in text or "}" in text:
        raise SelcalError(f"{said('pattern')} {printable(pattern)}: a brace that opens or closes no field; fields are "
                          "written {name}")
    return ".*?".join(re.escape(piece) for piece in text.split("*")).replace(".*?", "[^/]*?")


def runs_from_pattern(paths: Sequence, pattern: str) -> list[Run]:
    """Each path's run, read from the template ``pattern`` (see :func:`compile_pattern`).

    A path the template does not match is refused, naming the path and the template.
    """
    regex, names = compile_pattern(pattern)
    if not paths:
        raise SelcalError("no run given; give the dumps of the runs, e.g. " + (
            "selcal study runs/*/*.parquet --pattern ..." if naming_flags() else
            "selcal.study(glob.glob('runs/*/*.parquet'), pattern=...)"))
    found = []
    for path in paths:
        text = str(path)
        match = regex.match(text)
        if match is None:
            raise SelcalError(f"{printable(text)}: does not match the template {said('pattern')} {printable(pattern)}; "
                              "give a template every run's path matches (fields in braces, * as a wildcard)")
        values = match.groupdict()
        extra = {name: values[name] for name in names if name not in ("dataset", "recipe", "seed")}
        found.append((text, values["recipe"], values["seed"], values.get("dataset"), extra, None))
    return _checked(found, f"{said('pattern')} {printable(pattern)}")


def runs_from_manifest(path) -> list[Run]:
    """The runs of a CSV manifest: columns ``path``, ``recipe``, ``seed``, optionally ``dataset``,
    ``val`` (a validation dump of the run) and any other (a column of the outputs). A relative
    path is relative to the manifest's folder."""
    from ..io.lists import csv_rows

    where = printable(str(path))
    rows = csv_rows(path, f"{said('manifest')} takes a CSV with a header path,recipe,seed (optionally dataset) and a "
                          "row per run")
    header = [cell.strip() for cell in rows[0]]
    missing = [c for c in MANIFEST_COLUMNS if c not in header]
    if missing:
        raise SelcalError(f"{where}: has no column {', '.join(missing)} (columns: {printable(', '.join(header))}); "
                          "a manifest has the columns path, recipe, seed and optionally dataset")
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise SelcalError(f"{where}: the column '{printable(duplicated[0])}' appears twice")
    if len(rows) == 1:
        raise SelcalError(f"{where}: has a header but no run; add a row per run")
    base = Path(path).parent
    found = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise SelcalError(f"{where}: line {number} has {len(row)} cells but the header has {len(header)}")
        cells = dict(zip(header, (cell.strip() for cell in row)))
        for column in MANIFEST_COLUMNS + (("dataset",) if "dataset" in header else ()):
            if not cells[column]:
                raise SelcalError(f"{where}: line {number}, column '{column}' is empty; every run needs a "
                                  f"{column}")
        run_path, val = cells["path"], cells.get("val") or None
        run_path = run_path if Path(run_path).is_absolute() else str(base / run_path)
        if val is not None and not Path(val).is_absolute():
            val = str(base / val)
        extra = {c: v for c, v in cells.items() if c not in MANIFEST_COLUMNS + ("dataset", "val")}
        found.append((run_path, cells["recipe"], cells["seed"], cells.get("dataset"), extra, val))
    return _checked(found, where)


def _checked(found: list[tuple], source: str) -> list[Run]:
    """Runs with typed seeds; a seed that is an integer in some runs and not in others, and two
    runs of one (data set, recipe, seed), are refused."""
    integer = [bool(_INTEGER.match(seed)) for _, _, seed, *_ in found]
    if any(integer) and not all(integer):
        text = next(f for f, is_int in zip(found, integer) if not is_int)
        number = next(f for f, is_int in zip(found, integer) if is_int)
        raise SelcalError(f"{printable(text[0])}: its seed '{printable(text[2])}' is text but {printable(number[0])}'s "
                          f"seed {number[2]} is an integer ({source}); seeds must be all integers or all names")
    runs = [Run(path, recipe, int(seed) if is_int else seed, dataset, extra, val)
            for (path, recipe, seed, dataset, extra, val), is_int in zip(found, integer)]
    seen: dict[tuple, Run] = {}
    for run in runs:
        if run.key in seen:
            raise SelcalError(f"{printable(run.path)}: is the same run as {printable(seen[run.key].path)} "
                              f"({printable(run.describe())}); give each run its own seed, or leave one out")
        seen[run.key] = run
    return sorted(runs, key=_order)


def _order(run: Run):
    """Runs in a fixed order: data set, recipe, seed (numbers as numbers)."""
    return (run.dataset or "", run.recipe, run.seed)
