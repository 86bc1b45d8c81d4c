"""A fast start: ``selcal --help``, ``--version``, a command's help and a shell completion load none
of the heavy libraries (scipy, matplotlib, polars, pyarrow); a command loads them when it needs them.

The time itself is measured by ``bench/bench_startup.py`` (a ratio against ``import numpy, typer``);
what is imported is what decides it, and that is checked here, in a fresh interpreter each time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = {"scipy", "matplotlib", "polars", "pyarrow"}
COMPLETION = {"_SELCAL_COMPLETE": "complete_bash", "COMP_WORDS": "selcal evaluate --aurc-estimator ",
              "COMP_CWORD": "3"}


def loaded_by(argv: list[str], env: dict | None = None) -> set[str]:
    """The top-level packages loaded when ``selcal ARGV`` has run (through the console entry point)."""
    import os

    code = ("import atexit, json, sys\n"
            "atexit.register(lambda: sys.stderr.write('\\nLOADED ' + json.dumps(sorted({m.split('.')[0] for m in "
            "sys.modules})) + '\\n'))\n"
            f"sys.argv = ['selcal', *{argv!r}]\n"
            "from selcal.cli import run\n"
            "run()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))
    return set(json.loads(line[len("LOADED "):]))


@pytest.mark.slow
@pytest.mark.parametrize("argv, env", [(["--help"], None), (["--version"], None), (["evaluate", "--help"], None),
                                       ([], COMPLETION)], ids=["help", "version", "evaluate-help", "completion"])
def test_starting_loads_no_heavy_library(argv, env):
    loaded = loaded_by(argv, env)
    assert "selcal" in loaded and "typer" in loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


@pytest.mark.slow
def test_a_completion_loads_nothing_the_help_does_not():
    assert loaded_by([], COMPLETION) <= loaded_by(["--help"]) | {"shellingham", "shlex"}  # (the shell's words)
