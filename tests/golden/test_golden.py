"""The command line's outputs, byte for byte, against tests/golden/expected/ (see make_golden.py).

A difference is a change of behaviour: either a bug, or an intended change that is then
written again with ``python tests/golden/make_golden.py`` and named in the commit message.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_golden  # noqa: E402


def test_every_output_is_byte_identical_to_the_golden_files(tmp_path):
    make_golden.write(tmp_path / "golden")
    got = {p.name: p.read_bytes() for p in (tmp_path / "golden").iterdir()}
    expected = {p.name: p.read_bytes() for p in make_golden.EXPECTED.iterdir()}
    assert sorted(got) == sorted(expected)
    differ = [name for name in sorted(expected) if got[name] != expected[name]]
    if differ:
        first = differ[0]
        diff = "".join(list(difflib.unified_diff(expected[first].decode().splitlines(True),
                                                 got[first].decode().splitlines(True), "expected", "got"))[:60])
        raise AssertionError(f"{len(differ)} outputs differ: {', '.join(differ)}\n{first}:\n{diff}")
