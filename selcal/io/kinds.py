"""What a file is, from its first bytes and its name: for the one line that says so when a command is
given a file of another kind (a dump given to ``check``, a result JSON given to ``evaluate``).

Read only after a reader failed (or to choose a message): nothing here decides how a file is read.
"""

from __future__ import annotations

import json
import os
import zipfile

__all__ = ["Kind", "sniff", "wrong_kind"]

_HEAD = 1 << 20  # bytes read to tell a JSON document's kind (a result JSON's first keys come first)


class Kind(tuple):
    """(what the file is, the command that takes it or None)."""

    @property
    def what(self) -> str:
        return self[0]

    @property
    def command(self) -> str | None:
        return self[1]


def _json_kind(data: dict) -> Kind | None:
    if "schema" in data and "models" in data:
        return Kind(("a selcal result JSON (written by selcal evaluate --json)", "selcal check"))
    if data.get("command") in ("check", "compare") and "rows" in data:
        return Kind((f"a selcal {data['command']} report JSON", None))
    if "risk_target" in data and "threshold" in data:
        return Kind(("a selcal threshold answer JSON", None))
    return None


def sniff(path) -> Kind | None:
    """What the file at ``path`` is, or None when its first bytes say nothing selcal knows."""
    path = str(path)
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return None
    if head.startswith(b"PAR1"):
        return Kind(("a Parquet file (a logit dump)", "selcal evaluate"))
    if head.startswith(b"\x93NUMPY"):
        return Kind(("a NumPy .npy array (a logit dump)", "selcal evaluate"))
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            names = []
        if any(name.endswith("data.pkl") for name in names):
            return Kind(("a PyTorch .pt file (a logit dump)", "selcal evaluate"))
        if names and all(name.endswith(".npy") for name in names):
            return Kind(("an .npz archive of arrays (a logit dump)", "selcal evaluate"))
        return Kind(("a zip archive", None))
    for magic, name in ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd")):
        if head.startswith(magic):
            return Kind((f"a {name}-compressed file (a compressed CSV or JSON Lines dump, named .csv.gz or "
                         ".jsonl.gz?)", "selcal evaluate"))
    text = head.lstrip()
    if text.startswith(b"["):  # a JSON array (not CSV, for all its commas)
        return Kind(("a JSON array", None))
    if text.startswith(b"{"):
        first, _, rest = text.partition(b"\n")
        try:
            data = json.loads(first)
            lines = bool(rest.strip())
        except ValueError:  # a document over several lines
            try:
                data = json.loads(text.decode("utf-8", errors="replace")) if len(head) < _HEAD else None
            except ValueError:
                data = None
            lines = False
        if data is None and b'"schema"' in text[:200] and b'"models"' in text:  # a long result JSON
            data = {"schema": None, "models": None}
        if isinstance(data, dict):
            known = _json_kind(data)
            if known is not None:
                return known
            if lines or os.path.basename(path).startswith("samples_"):
                return Kind(("a JSON Lines file (a dump, or an lm-evaluation-harness log)", "selcal evaluate"))
        return Kind(("a JSON document", None))
    first = text.split(b"\n", 1)[0]
    if first.count(b",") >= 1 and b"\0" not in first:
        return Kind(("CSV text (a dump?)", "selcal evaluate"))
    return None


def wrong_kind(kind: Kind, wanted: str) -> str:
    """The words of a message for a file of ``kind`` given where ``wanted`` (what the command reads and
    how it is made) is expected: ``is a Parquet file (a logit dump), which `selcal evaluate` reads; ...``."""
    takes = f", which `{kind.command}` reads" if kind.command else ""
    return f"is {kind.what}{takes}; {wanted}"
