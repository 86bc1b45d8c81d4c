"""The face of a call (the command line's flags, or the Python arguments: selcal.errors.naming_flags) is decided
where the call enters and reaches the work it starts wherever that runs: the reduce pass's threads and the fits'
threads (a pool's thread starts with an empty context, the Python face) and Ray tasks (a worker process knows no
caller): a command run with ``--engine ray`` still says ``--val FILE``, the same Python call ``val=FILE``."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import one_error_line

import selcal
from selcal.errors import SelcalError, command_line, naming_flags
from selcal.scores import REGISTRY


@pytest.fixture
def faces_seen():
    """A registered score 'face' that records, for every block it scores, the face and the thread it ran in."""
    seen: list[tuple[bool, int]] = []

    def score(logits, state):
        seen.append((naming_flags(), threading.get_ident()))
        return logits.max(axis=1)

    selcal.register_score("face", score=score, description="the max logit, noting the face it ran in")
    yield seen
    REGISTRY.pop("face")


@pytest.mark.parametrize("flags", [False, True], ids=["python", "command-line"])
def test_the_reduce_threads_run_in_the_face_of_their_caller(tmp_path, faces_seen, flags):
    rng = np.random.default_rng(3)
    n = selcal.scores.CACHE_ELEMENTS + 17  # rows of 3 classes: 4 blocks of CACHE_ELEMENTS logits for two threads
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"label": rng.integers(0, 3, n), "logits": pa.array(list(rng.normal(0, 2, (n, 3))))}), path)
    with command_line(flags):
        selcal.evaluate(path, scores="face", workers=2)
    assert faces_seen and threading.main_thread().ident not in {ident for _, ident in faces_seen}  # (the pool's)
    assert {face for face, _ in faces_seen} == {flags}


@pytest.mark.parametrize("flags", [False, True], ids=["python", "command-line"])
def test_the_fits_threads_run_in_the_face_of_their_caller(flags):
    from selcal.scores.fits import _threads

    with command_line(flags), _threads(4) as run:
        assert list(run(lambda _: naming_flags(), range(8))) == [flags] * 8


class _Ref:
    """A task's outcome (hashable, as a Ray object reference is)."""

    value = error = None


class _TaskError(Exception):
    def __init__(self, cause):
        super().__init__(str(cause))
        self.cause = cause


@pytest.fixture
def fake_ray(monkeypatch):
    """Ray as far as selcal's engine uses it: each task runs on a thread of its own, whose context starts empty,
    as a worker's does (it inherits no face from the caller)."""
    ray = types.ModuleType("ray")
    ray.exceptions = types.SimpleNamespace(RayTaskError=_TaskError, RayError=RuntimeError)
    ray.is_initialized = lambda: True
    ray.cluster_resources = lambda: {"CPU": 2.0}

    def remote(fn):
        def run(*args):
            outcome = _Ref()

            def work():
                try:
                    outcome.value = fn(*args)
                except Exception as exc:  # noqa: BLE001 (a task's error is its outcome)
                    outcome.error = exc
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()
            return outcome
        return types.SimpleNamespace(options=lambda **_: types.SimpleNamespace(remote=run))

    def get(ref):
        if ref.error is not None:
            raise _TaskError(ref.error)
        return ref.value

    ray.remote, ray.get = remote, get
    ray.wait = lambda pending, num_returns=1: (pending[:num_returns], pending[num_returns:])
    monkeypatch.setitem(sys.modules, "ray", ray)
    return ray


@pytest.fixture
def two_rows(tmp_path):
    rng = np.random.default_rng(4)
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({"label": [0, 1], "logits": pa.array(list(rng.normal(0, 2, (2, 3))))}), path)
    return path


def test_a_job_on_a_ray_worker_names_what_the_python_caller_used(fake_ray, two_rows):
    with pytest.raises(SelcalError) as error:
        selcal.evaluate(two_rows, scores="temp", engine="ray")
    assert "give a larger file, val=FILE, or a split column" in str(error.value) and "--" not in str(error.value)


def test_a_job_on_a_ray_worker_names_the_flags_of_the_command(fake_ray, two_rows, cli):
    one_error_line(cli("evaluate", two_rows, "--scores", "temp", "--engine", "ray"),
                   "give a larger file, --val FILE, or a split column")
