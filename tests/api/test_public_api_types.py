"""The public API type-checks (selcal ships py.typed): mypy on its entry points (pyproject's [tool.mypy]),
mypy --strict on a user's script that uses every integration (tests/api/typed_user_script.py), and a
script that misuses the API is caught, so the types a user's checker sees are selcal's, not Any."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "typed_user_script.py"
MISUSE = '''
import numpy as np
import numpy.typing as npt

import selcal
from selcal import metrics


def misuse(labels: npt.NDArray[np.int64], probabilities: npt.NDArray[np.float64]) -> None:
    name: str = metrics.aurc(labels, probabilities)
    selcal.evaluate_arrays(probabilities, labels, bootstrap="ten")
    run: int = selcal.log_to_mlflow(selcal.evaluate_arrays(probabilities, labels))
    selcal.DumpWriter("dump", split="val").add(probabilities)
'''


@pytest.fixture(scope="module")
def mypy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mypy_cache")

    def run(*args: str) -> tuple[str, int]:
        out, err, status = mypy_api.run(["--cache-dir", str(cache), "--config-file", str(ROOT / "pyproject.toml"),
                                         *args])
        return out + err, status

    return run


@pytest.mark.slow
def test_the_public_entry_points_type_check(mypy, monkeypatch):
    monkeypatch.chdir(ROOT)  # the files of [tool.mypy]
    out, status = mypy()
    assert status == 0, out


@pytest.mark.slow
def test_a_users_script_type_checks_strictly(mypy, monkeypatch):
    monkeypatch.chdir(ROOT)
    out, status = mypy("--strict", str(SCRIPT))
    assert status == 0, out


@pytest.mark.slow
def test_a_script_that_misuses_the_api_is_caught(mypy, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    script = tmp_path / "misuse.py"
    script.write_text(MISUSE)
    out, status = mypy("--strict", str(script))
    assert status == 1
    for finding in ('expression has type "float", variable has type "str"',
                    'Argument "bootstrap" to "evaluate_arrays" has incompatible type "str"; expected "int"',
                    'expression has type "str", variable has type "int"',
                    'Missing positional argument "labels" in call to "add" of "DumpWriter"'):
        assert finding in out, out


def test_py_typed_ships_in_the_package():
    assert files("selcal").joinpath("py.typed").is_file()
    assert 'selcal = ["schema/*.json", "py.typed"]' in (ROOT / "pyproject.toml").read_text()
