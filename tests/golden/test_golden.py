"""The command line's outputs against tests/golden/expected/ (see make_golden.py): byte for byte for
every exact number, within the fit's certified tolerance for the fits solved by scipy.optimize
(tests/golden/compare.py says how).

A difference is a change of behaviour: either a bug, or an intended change that is then
written again with ``python tests/golden/make_golden.py`` and named in the commit message.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_golden  # noqa: E402
from compare import differences  # noqa: E402


@pytest.mark.slow
def test_every_output_agrees_with_the_golden_files(tmp_path):
    make_golden.write(tmp_path / "golden")
    got = {p.name: p.read_bytes() for p in (tmp_path / "golden").iterdir()}
    expected = {p.name: p.read_bytes() for p in make_golden.EXPECTED.iterdir()}
    assert sorted(got) == sorted(expected)
    found = {name: differences(name, expected[name], got[name]) for name in sorted(expected)}
    found = {name: lines for name, lines in found.items() if lines}
    assert not found, "\n".join(f"{name}: {len(lines)} differences, first: " + "; ".join(lines[:5])
                                for name, lines in found.items())
