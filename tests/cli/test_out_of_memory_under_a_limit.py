"""The command under a real address-space limit (``ulimit -v``) ends with one line and status 2, never a
hang, a segfault or a Parquet file called corrupted (CONVENTIONS.md, "Out of memory"):

- at 150 MB scipy's OpenBLAS, loaded after numpy's, could not reserve its buffer and looped for good
  inside its start-up, deaf to SIGTERM (``timeout`` could not end it): the command now checks that the
  address space its BLAS libraries take is free before loading them;
- at 300 MB the line was printed, then the interpreter's shutdown ran the destructors of a pyarrow module
  that had failed to map and the process died by SIGSEGV (status 139): after the out-of-memory line the
  process ends with ``os._exit`` once its streams are flushed;
- at 375-525 MB Arrow's ``malloc of size N failed`` and ``Failed to launch worker thread`` were reported as
  "not a readable Parquet file ... truncated or corrupted?".
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pyarrow as pa
import pytest

from selcal.errors import out_of_memory

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "sample_logits", "calibrator_cifar10_resnet50_ce.parquet")


def limited(megabytes: int, args, tmp_path):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))

    return subprocess.run([sys.executable, "-m", "selcal.cli", *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit, cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.mark.slow
@pytest.mark.parametrize("megabytes", [150, 300, 475])
def test_a_run_under_an_address_space_limit_is_one_line_and_status_2(tmp_path, megabytes):
    done = limited(megabytes, ["evaluate", os.path.abspath(SAMPLE), "--scores", "msp,temp", "--json", "out.json"],
                   tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("selcal: error: out of memory") and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out.json").exists()


def test_arrow_out_of_memory_is_not_a_corrupted_file(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from selcal.io import read_dump

    def refuse(*args, **kwargs):
        raise pa.ArrowMemoryError("malloc of size 597888 failed")

    monkeypatch.setattr(pq, "ParquetFile", refuse)
    with pytest.raises(MemoryError):
        read_dump(os.path.abspath(SAMPLE))
    assert out_of_memory(pa.lib.ArrowException("Unknown error: Failed to launch worker thread: Resource temporarily "
                                                "unavailable"))
    assert not out_of_memory(pa.lib.ArrowInvalid("Parquet magic bytes not found in footer"))


@pytest.mark.slow
def test_figures_under_a_limit_print_only_the_line(tmp_path):
    """At 400 MB matplotlib could not import its 3D axes and warned in two lines before the out-of-memory
    line; selcal draws no 3D axes and silences that warning."""
    npz = os.path.join(os.path.dirname(SAMPLE), "hollance_timm_resnet34.npz")
    done = limited(400, ["evaluate", os.path.abspath(npz), "--scores", "msp,temp", "--plots", "p", "--json",
                         "out.json"], tmp_path)
    assert done.returncode in (0, 2), (done.returncode, done.stderr)
    assert "Axes3D" not in done.stderr and "Warning" not in done.stderr, done.stderr
