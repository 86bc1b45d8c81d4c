"""The modules that moved into their rooms (issue 31): the old names still import, for one release,
the same module object with a DeprecationWarning naming the new place; and the script that rewrites
old imports (scripts/rewrite_imports.py) reads a file written against the old layout correctly."""
# rewrite_imports: off  (this file writes the old names on purpose)

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

import selcal


@pytest.mark.parametrize("old", sorted(selcal.MOVED))
def test_an_old_module_name_imports_the_moved_module_and_warns_where_it_is_imported(old, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    new = selcal.MOVED[old]
    with pytest.warns(DeprecationWarning, match=rf"{old} has moved to {new}\b") as caught:
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert all(w.filename != selcal.__file__ for w in caught)


def test_the_imports_the_readme_documented_still_work(monkeypatch):
    for old in ("selcal.html_report", "selcal.guarantee", "selcal.diagnostics"):
        monkeypatch.delitem(sys.modules, old, raising=False)
        monkeypatch.delattr(selcal, old.split(".")[1], raising=False)
    with pytest.warns(DeprecationWarning, match="selcal.report.html") as caught:
        from selcal.html_report import write_report
    assert caught[0].filename == __file__
    assert write_report is selcal.report.html.write_report
    with pytest.warns(DeprecationWarning, match="selcal.metrics.diagnostics") as caught:
        assert selcal.diagnostics.sweep_series is selcal.metrics.diagnostics.sweep_series  # no import written
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="selcal.threshold.guarantee") as caught:
        from selcal import guarantee
    assert caught[0].filename == __file__
    assert guarantee.ltt is selcal.guarantee.ltt is selcal.threshold.guarantee.ltt


def test_evaluate_and_threshold_are_the_functions_and_their_modules_are_reachable():
    import selcal.api
    import selcal.threshold.run

    assert selcal.evaluate is selcal.api.evaluate and callable(selcal.evaluate)
    assert callable(selcal.threshold) and selcal.threshold.run.threshold.__module__ == "selcal.threshold.run"
    assert selcal.threshold.guarantee.ltt.__module__ == "selcal.threshold.guarantee"


def test_at_most_eight_modules_at_the_top_level():
    top = sorted(p.name for p in (ROOT / "selcal").glob("*.py"))
    assert len(top) <= 8, top


OLD = '''from .calibration import ece
from . import __version__, scores
from .io import atomic_write, read_dump
from .io.output import classify
'''


def run_rewrite(path: Path) -> str:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "rewrite_imports.py"), str(path)], check=True,
                   capture_output=True)
    return path.read_text()


def test_the_rewrite_script_rewrites_a_moved_file_against_its_old_place_and_only_once(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(ROOT / "selcal", work / "selcal")
    path = work / "selcal" / "writers" / "ensemble.py"  # was selcal/ensemble.py
    path.write_text(OLD)
    assert run_rewrite(path) == ('from ..metrics.calibration import ece\n'
                                 'from .. import __version__, scores\n'
                                 'from .output import atomic_write\n'
                                 'from ..io import read_dump\n'
                                 'from .output import classify\n')
    assert run_rewrite(path) == run_rewrite(path)


def test_the_rewrite_script_rewrites_absolute_imports_and_dotted_names_not_the_function_or_a_key(tmp_path):
    path = tmp_path / "test_x.py"
    path.write_text('import sys\nfrom selcal import calibration, io\nimport selcal.deployment as d\n'
                    'm = sys.modules["selcal.evaluate"]\nr = selcal.evaluate("x.parquet")\n'
                    'k = metadata["selcal.ensemble"]\np = "selcal/html_report.py"\n'
                    'monkeypatch.setattr("selcal.guarantee.ltt", f)\nfrom selcal import html_report\n')
    assert run_rewrite(path) == (
        'import sys\nfrom selcal.metrics import calibration\nfrom selcal import io\nimport selcal.threshold.run as d\n'
        'm = sys.modules["selcal.api"]\nr = selcal.evaluate("x.parquet")\n'
        'k = metadata["selcal.ensemble"]\np = "selcal/report/html.py"\n'
        'monkeypatch.setattr("selcal.threshold.guarantee.ltt", f)\nfrom selcal.report import html as html_report\n')
# rewrite_imports: on
