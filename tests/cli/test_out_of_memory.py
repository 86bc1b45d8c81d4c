"""Out of memory at any point of the command, its imports included, is one line and status 2
(CONVENTIONS.md, "Out of memory").

Memory cannot be exhausted on purpose here reliably, so the failures are those a process under an
address-space limit meets, raised where it meets them: a library that cannot be mapped while the
command loads (``ImportError: ... failed to map segment from shared object``), the same for a library
loaded on first use in the middle of a run (scipy), a MemoryError in a reader, a thread that cannot
start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from selcal.errors import out_of_memory

FAILING_IMPORT = textwrap.dedent("""
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name == {module!r}:
                raise ImportError("/venv/lib/{module}.cpython-311-x86_64-linux-gnu.so: failed to map segment "
                                  "from shared object")

    sys.meta_path.insert(0, Refuse())
""")


def run_selcal(tmp_path, args, prelude=""):
    code = prelude + "\nimport sys\nsys.argv = ['selcal', *%r]\nfrom selcal.cli import run\nrun()\n" % (list(args),)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.fixture
def dump(tmp_path):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 200)
    np.savez(tmp_path / "m.npz", logits=rng.normal(size=(200, 3)), labels=labels)
    return tmp_path / "m.npz"


def test_a_library_of_the_command_that_does_not_fit_is_one_line(tmp_path, dump):
    done = run_selcal(tmp_path, ["evaluate", str(dump)], FAILING_IMPORT.format(module="typer"))
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("selcal: error: out of memory while loading its libraries; give the process more memory "
                           "(its limit: ulimit -v)\n")


def test_a_library_loaded_in_the_middle_of_a_run_that_does_not_fit_is_one_line(tmp_path, dump):
    done = run_selcal(tmp_path, ["evaluate", str(dump), "--scores", "msp,temp", "--json", "out.json"],
                      FAILING_IMPORT.format(module="scipy.optimize"))
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("selcal: error: out of memory while loading scipy.optimize; give the process more memory "
                           "(its limit: ulimit -v)\n")
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("error", ["MemoryError()", pytest.param("RuntimeError(\"can't start new thread\")", marks=pytest.mark.slow),
                                   pytest.param("OSError(12, 'Cannot allocate memory')", marks=pytest.mark.slow)])
def test_memory_running_out_in_a_reader_is_one_line(tmp_path, dump, error):
    prelude = f"import selcal.io.npz as npz\ndef boom(*a, **k):\n    raise {error}\nnpz.load_npz = boom\n"
    done = run_selcal(tmp_path, ["evaluate", str(dump)], prelude)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("selcal: error: out of memory") and done.stderr.count("\n") == 1, done.stderr


def test_out_of_memory_is_told_apart_from_other_errors():
    assert out_of_memory(MemoryError()) and out_of_memory(OSError(12, "Cannot allocate memory"))
    assert out_of_memory(ImportError("x.so: cannot allocate memory in static TLS block"))
    wrapped = ValueError("while reading")
    wrapped.__cause__ = MemoryError()
    assert out_of_memory(wrapped)
    assert not out_of_memory(ImportError("No module named 'torch'")) and not out_of_memory(OSError(2, "No such file"))
