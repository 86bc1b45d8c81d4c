"""Check that two sets of golden outputs differ only by new metric keys.

    python tests/golden/new_keys.py OUT_DIR KEY [KEY ...]

Compares OUT_DIR (written by ``make_golden.py OUT_DIR``) with ``tests/golden/expected/``: in JSON
files every object key KEY (and ``KEY`` after a score, ``msp.KEY``) and every list item that names
one is dropped before the rest is compared as tests/golden/compare.py compares (exactly, the fits
solved by scipy within their certificate); in text files (terminal
tables, Markdown, CSV, JUnit) the lines that name a key or its catalog label are dropped. Prints
what still differs (as unified diffs, or JSON paths) and exits 1 if anything does: an added metric
must leave every other number and line as it was. The counts of judged metrics in check and
compare outputs change with a new metric (and so may Holm's thresholds): those lines are printed
for a person to read.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from compare import differences  # noqa: E402


def _names(keys: list[str]) -> list[str]:
    from selcal.metrics import catalog

    return [catalog.name(k) for k in keys if catalog.get(k) is not None]


def _mentions(text: str, keys: list[str], labels: list[str]) -> bool:
    return any(re.search(rf"(^|[^A-Za-z0-9_]){re.escape(k)}([^A-Za-z0-9_]|$)", text) for k in keys) \
        or any(label in text for label in labels)


def _strip(value, keys: list[str], labels: list[str]):
    if isinstance(value, dict):
        return {k: _strip(v, keys, labels) for k, v in value.items() if not _mentions(k, keys, [])}
    if isinstance(value, list):  # a string naming a key, or a row whose own text names one (check's rows)
        return [_strip(v, keys, labels) for v in value
                if not _mentions(" ".join(x for x in ([v] if isinstance(v, str) else v.values() if isinstance(v, dict)
                                                    else []) if isinstance(x, str)), keys, labels)]
    return value


def _lines(text: str, keys: list[str], labels: list[str]) -> list[str]:
    """The lines of a text output without those naming a key (and a table row's continuation lines,
    whose first cell is empty); JUnit's test cases naming a key removed."""
    text = re.sub(r'<testcase [^>]*name="[^"]*"[^>]*?(/>|>.*?</testcase>)',
                  lambda m: "" if _mentions(m.group(0).split(">")[0], keys, labels) else m.group(0), text)
    out, dropping = [], False
    for line in text.splitlines(True):
        if _mentions(line, keys, labels):
            dropping = True
            continue
        if dropping and re.match(r"\s+│", line):
            continue
        dropping = False
        out.append(line)
    return out


def compare(out: Path, keys: list[str], expected: Path = EXPECTED) -> list[str]:
    labels = _names(keys)
    problems = []
    names = sorted({p.name for p in expected.iterdir()} | {p.name for p in out.iterdir()})
    for name in names:
        old, new = expected / name, out / name
        if not old.exists() or not new.exists():
            problems.append(f"{name}: only in {'OUT' if new.exists() else 'expected'}")
            continue
        if name.endswith(".json"):
            a, b = (json.dumps(_strip(json.loads(p.read_text()), keys, labels), indent=1) for p in (old, new))
        else:
            a, b = ("".join(_lines(p.read_text(), keys, labels)) for p in (old, new))
        if differences(name, a.encode(), b.encode()):  # (the fits' numbers within their certificate)
            problems.append("".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                                         f"expected/{name}", f"OUT/{name}", n=0)))
    return problems


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    found = compare(Path(sys.argv[1]), sys.argv[2:])
    print("\n".join(found) or "only the new keys differ")
    raise SystemExit(1 if found else 0)
