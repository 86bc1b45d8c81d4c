"""No module of selcal takes a private name (``_x``) from another, wherever the import is written.

An underscore says "only this module uses it": a name another module needs is public (in a private
module when it is an implementation detail). The imports are read from the source (AST), so an import
inside a function counts, and so does ``module._x`` through a module imported by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "selcal"


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(sources: dict[str, str]) -> list[str]:
    """``module: takes NAME from OTHER (line N)`` for every private name one module takes from another.

    ``sources``: module name -> its source (a package under its own name, as its __init__)."""
    found = []
    for name, text in sorted(sources.items()):
        is_package = any(other.startswith(name + ".") for other in sources)
        base = name.split(".") if is_package else name.split(".")[:-1]
        tree = ast.parse(text)
        modules: dict[str, str] = {}  # local name -> selcal module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    module = ".".join(base[:len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                if not (module in sources or any(other.startswith(module + ".") for other in sources)):
                    continue  # not a selcal module
                for alias in node.names:
                    if f"{module}.{alias.name}" in sources:
                        modules[alias.asname or alias.name] = f"{module}.{alias.name}"
                    elif private(alias.name) and module != name:
                        found.append(f"{name}: takes {alias.name} from {module} (line {node.lineno})")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in sources and alias.asname:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name) \
                    and modules.get(node.value.id, name) != name:
                found.append(f"{name}: takes {node.attr} from {modules[node.value.id]} (line {node.lineno})")
    return found


def test_the_finder_sees_a_private_name_taken_in_a_function_or_through_a_module():
    sources = {
        "pkg": "",
        "pkg.a": "_x = 1\ny = 2\n",
        "pkg.b": "def f():\n    from .a import _x\n    return _x\n",
        "pkg.c": "from . import a\nprint(a._x, a.y)\n",
        "pkg.d": "from .a import y\n_z = 3\nprint(_z)\n",
    }
    assert private_imports(sources) == ["pkg.b: takes _x from pkg.a (line 2)", "pkg.c: takes _x from pkg.a (line 2)"]


def test_no_selcal_module_takes_a_private_name_from_another():
    sources = {module_name(p, PACKAGE): p.read_text() for p in PACKAGE.rglob("*.py")}
    found = private_imports(sources)
    assert not found, "private names taken across modules:\n" + "\n".join(found)
