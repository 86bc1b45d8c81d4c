"""Rewrite selcal's old module paths to the rooms of issue 31, in the .py and .md files named.

    python scripts/rewrite_imports.py FILE [FILE ...]       # rewrite in place, print what changed
    python scripts/rewrite_imports.py --check FILE [...]    # print only; exit 1 if anything would change

Run it after rebasing onto the layout (``git diff --name-only main... | grep -E '\\.(py|md)$'``). It rewrites:

- absolute imports (``from selcal.calibration import ece``, ``import selcal.deployment as d``);
- relative imports, resolved against the file's own place: a file of selcal/ that moved is read
  against its old place where only that reading names a module of the old layout (so running the
  script twice changes nothing);
- ``from selcal import calibration`` (a moved module imported as a name; a renamed one keeps its
  old name with ``as``), and the names the reading package ``selcal.io`` no longer re-exports
  (``atomic_write``, ``Outputs``: now in ``selcal.writers.output``);
- dotted references anywhere in the text (``selcal.guarantee.ltt``, ``"selcal.deployment._x"`` in a
  monkeypatch, ``sys.modules["selcal.evaluate"]``, ``:mod:`selcal.selective```) and file paths
  (``selcal/html_report.py``, ``selcal/dump/``).

Left alone: the lines from one holding ``rewrite_imports: off`` to one holding ``rewrite_imports: on``,
``selcal.evaluate`` where it is the function (a call, ``from selcal import evaluate``)
and ``selcal.ensemble``, which is also a Parquet metadata key; check those by eye.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path



def moved_modules() -> dict[str, str]:
    """Old module -> new module (a package moves with everything below it): ``selcal.MOVED``, the table
    of the deprecated names, read from the source beside this script (nothing is imported), and
    ``selcal.evaluate``, whose name stays the function."""
    init = Path(__file__).resolve().parents[1] / "selcal" / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["MOVED"]:
            return {"selcal.evaluate": "selcal.api", **ast.literal_eval(node.value)}
    raise SystemExit(f"{init}: no MOVED table (is this the layout of issue 31?)")


MOVES = moved_modules()
# (old module, name) -> the module that holds the name now
NAME_MOVES = {
    ("selcal.io", "atomic_write"): "selcal.writers.output",
    ("selcal.io", "Outputs"): "selcal.writers.output",
}
NEW_PACKAGES = {"selcal.writers", "selcal.threshold"}  # no module of the old layout had these names
FUNCTION_NOT_MODULE = {"selcal.evaluate"}  # ``from selcal import evaluate`` is the function
KEEP_BARE = {"selcal.evaluate", "selcal.ensemble"}  # as a whole word: the function; a metadata key


def map_module(name: str) -> str:
    for old in sorted(MOVES, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return MOVES[old] + name[len(old):]
    return name


def unmap_module(name: str) -> str:
    for old, new in sorted(MOVES.items(), key=lambda item: len(item[1]), reverse=True):
        if name == new or name.startswith(new + "."):
            return old + name[len(new):]
    return name


def module_names(root: Path) -> set[str]:
    names = set()
    for path in (root / "selcal").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return names


def repo_root(path: Path) -> Path | None:
    for parent in path.resolve().parents:
        if (parent / "selcal" / "__init__.py").exists():
            return parent
    return None


def own_package(path: Path, root: Path) -> list[str] | None:
    """The package a relative import in ``path`` starts from, or None outside selcal/."""
    try:
        parts = list(path.resolve().relative_to(root).with_suffix("").parts)
    except ValueError:
        return None
    if not parts or parts[0] != "selcal":
        return None
    return parts[:-1]  # a module's package; for __init__.py the package itself


def resolve(level: int, module: str | None, package: list[str]) -> str | None:
    up = level - 1
    if up > len(package) - 1:
        return None  # above selcal
    head = package[:len(package) - up]
    return ".".join(head + ([module] if module else []))


def relative(target: str, package: list[str]) -> tuple[int, str]:
    parts = target.split(".")
    common = 0
    while common < min(len(parts), len(package)) and parts[common] == package[common]:
        common += 1
    return len(package) - common + 1, ".".join(parts[common:])


class Rewriter:
    def __init__(self, path: Path):
        self.path = path
        self.root = repo_root(path)
        self.current = module_names(self.root) if self.root else set()
        self.old_layout = {unmap_module(m) for m in self.current if m not in NEW_PACKAGES} | set(MOVES)
        self.package = own_package(path, self.root) if self.root else None
        self.notes: list[str] = []
        if self.package is not None:
            name = ".".join(self.package + ([] if path.name == "__init__.py" else [path.stem]))
            old = unmap_module(name)
            old_parts = old.split(".")
            self.old_package = old_parts if path.name == "__init__.py" else old_parts[:-1]
        else:
            self.old_package = None

    # -- one import statement -------------------------------------------------------------------
    def absolute_from(self, node: ast.ImportFrom) -> tuple[str | None, bool]:
        """The old-layout absolute module a ``from`` import reads, and whether it was relative."""
        if not node.level:
            return node.module, False
        if self.package is None:
            return None, True
        here = resolve(node.level, node.module, self.package)
        if self.old_package == self.package:
            return here, True
        before = resolve(node.level, node.module, self.old_package)
        here_ok = here is not None and here in self.current
        before_ok = before is not None and before in self.old_layout
        if here_ok and before_ok and map_module(before) != here:  # both read: which one has the names?
            names = [alias.name for alias in node.names]
            here_has, before_has = self.provides(here, names), self.provides(map_module(before), names)
            if here_has == before_has:
                self.notes.append(f"line {node.lineno}: kept as written (it also reads as {before} from the old place)")
            if before_has and not here_has:
                return before, True
            before_ok = False
        if before_ok and (not here_ok or map_module(before) == here):
            return before, True
        return unmap_module(here) if here_ok else None, True

    def provides(self, module: str, names: list[str]) -> bool:
        """Whether every name is a submodule of ``module`` or bound at the top of its source."""
        base = self.root / Path(*module.split("."))
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        bound = set()
        if path.is_file():
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    bound.add(node.name)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    bound.update((a.asname or a.name).split(".")[0] for a in node.names)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    bound.update(t.id for t in targets if isinstance(t, ast.Name))
        return all(name in bound or f"{module}.{name}" in self.current for name in names)

    def rewrite_from(self, node: ast.ImportFrom, text: str) -> str | None:
        old, was_relative = self.absolute_from(node)
        if old is None or not (old == "selcal" or old.startswith("selcal.")):
            return None
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            full = f"{old}.{alias.name}"
            if (old, alias.name) in NAME_MOVES:
                target, name, asname = NAME_MOVES[(old, alias.name)], alias.name, alias.asname
            elif full in self.old_layout and map_module(full) != full and full not in FUNCTION_NOT_MODULE:
                new = map_module(full)
                target, name = new.rsplit(".", 1)
                asname = alias.asname or (alias.name if name != alias.name else None)
            else:
                target, name, asname = map_module(old), alias.name, alias.asname
            groups.setdefault(target, []).append(name + (f" as {asname}" if asname else ""))
        if list(groups) == [map_module(old)] and map_module(old) == old and self.old_package == self.package:
            return None  # nothing moved
        spell = (lambda t: "." * relative(t, self.package)[0] + relative(t, self.package)[1]) if was_relative \
            else (lambda t: t)
        if len(groups) == 1:
            (target, names), = groups.items()
            if names == [a.name + (f" as {a.asname}" if a.asname else "") for a in node.names]:
                new_text = re.sub(r"^(from\s+)[.\w]+(\s+import\b)", lambda m: m[1] + spell(target) + m[2], text)
                return None if new_text == text else new_text
        indent = " " * node.col_offset
        lines = []
        for target, names in groups.items():
            line = f"from {spell(target)} import {', '.join(names)}"
            if len(indent + line) > 120:
                line = f"from {spell(target)} import ({', '.join(names)})"
            lines.append(line)
        return ("\n" + indent).join(lines)

    def rewrite_import(self, node: ast.Import, text: str) -> str | None:
        new_text = text
        for alias in node.names:
            new = map_module(alias.name)
            if new != alias.name:
                new_text = re.sub(rf"(?<![\w.]){re.escape(alias.name)}(?![\w])", new, new_text, count=1)
        return None if new_text == text else new_text

    def imports(self, source: str) -> str:
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            self.notes.append(f"not parsed ({error.msg}, line {error.lineno}): imports left as they are")
            return source
        lines = source.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        edits = []
        kept = protected_lines(source)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in kept:
                continue
            start = offsets[node.lineno - 1] + len(lines[node.lineno - 1].encode()[:node.col_offset].decode())
            end = offsets[node.end_lineno - 1] + len(lines[node.end_lineno - 1].encode()[:node.end_col_offset].decode())
            text = source[start:end]
            new = self.rewrite_from(node, text) if isinstance(node, ast.ImportFrom) else self.rewrite_import(node, text)
            if new is not None:
                edits.append((start, end, new))
        for start, end, new in sorted(edits, reverse=True):
            source = source[:start] + new + source[end:]
        return source


def dotted(text: str) -> str:
    """``selcal.old.x`` -> ``selcal.new.x`` and ``selcal/old.py`` -> ``selcal/new.py`` in any text."""
    for old in sorted(MOVES, key=len, reverse=True):
        new = MOVES[old]
        word = rf"(?<![\w.]){re.escape(old)}(?![\w])"
        if old in KEEP_BARE:  # only as a module: followed by a non-dunder attribute or in sys.modules[...]
            text = re.sub(word + r"(?=\.(?!__)[A-Za-z_])", new, text)
            text = re.sub(rf"((?:sys\.modules\s*\[|import_module\(|setitem\(sys\.modules,)\s*)([\"']){re.escape(old)}\2",
                          lambda m: m[1] + m[2] + new + m[2], text)
        else:
            text = re.sub(word, new, text)
        old_path, new_path = old.replace(".", "/"), new.replace(".", "/")
        text = re.sub(rf"(?<![\w/.]){re.escape(old_path)}(?=\.py\b|/)", new_path, text)
    for (package, name), target in NAME_MOVES.items():
        text = re.sub(rf"(?<![\w.]){re.escape(package)}\.{name}\b", f"{target}.{name}", text)
    return text


def rewrite(path: Path) -> tuple[str, str, list[str]]:
    before = path.read_text()
    after = before
    notes: list[str] = []
    if path.suffix == ".py":
        rewriter = Rewriter(path)
        after = rewriter.imports(after)
        notes = rewriter.notes
    kept = protected_lines(after)
    lines = after.splitlines(keepends=True)
    after = "".join(line if number in kept else dotted(line) for number, line in enumerate(lines, 1))
    return before, after, notes


def protected_lines(text: str) -> set[int]:
    """Line numbers (from 1) from a line holding ``rewrite_imports: off`` to one holding ``rewrite_imports: on``
    (the table of old names itself, a test of the old names)."""
    kept, off = set(), False
    for number, line in enumerate(text.splitlines(), 1):
        off = off or "rewrite_imports: off" in line
        if off:
            kept.add(number)
        off = off and "rewrite_imports: on" not in line
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    changed = 0
    for path in args.files:
        if path.suffix not in (".py", ".md") or not path.is_file():
            continue
        before, after, notes = rewrite(path)
        for note in notes:
            print(f"{path}: {note}", file=sys.stderr)
        if after != before:
            changed += 1
            print(f"{'would rewrite' if args.check else 'rewrote'} {path}")
            if not args.check:
                path.write_text(after)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
