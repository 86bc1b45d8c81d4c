"""Many models and shards: one :class:`DumpTask` per part, run on an engine (local or Ray)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import SelcalError
from .run import run_dump
from .writer import DumpSummary
from ...options import CHOICES


def safe_model_name(model_name: str) -> str:
    """A model name as a file or folder name (``hf-hub:org/name`` -> ``hf-hub_org--name``)."""
    return model_name.replace("/", "--").replace(":", "_")


def part_path(out_dir, model_name: str, index: int, count: int) -> Path:
    """Where a part goes: ``OUT_DIR/MODEL.parquet`` unsharded, ``OUT_DIR/MODEL/part-00001-of-00003.parquet``."""
    name = safe_model_name(model_name)
    if count == 1:
        return Path(out_dir) / f"{name}.parquet"
    return Path(out_dir) / name / f"part-{index:05d}-of-{count:05d}.parquet"


@dataclass(frozen=True)
class DumpTask:
    """One part of one model's dump: a pure function of it (:func:`run_dump_task`)."""

    model_name: str
    data: str
    out: str
    shard: tuple[int, int] | None
    settings: dict
    kill_marker: str | None = None  # test hook: the first attempt of shard 1 dies after one batch


def _die_once(marker: str):
    def after_batch():
        if not os.path.exists(marker):
            Path(marker).touch()
            os._exit(1)  # like a worker lost to an OOM kill or a pre-empted node
    return after_batch


def run_dump_task(task: DumpTask) -> DumpSummary:
    """Dump one part (skipped when already complete with the same settings)."""
    hook = _die_once(task.kill_marker) if task.kill_marker and task.shard and task.shard[0] == 1 else None
    return run_dump(task.model_name, task.data, task.out, shard=task.shard, _after_batch=hook, **task.settings)


def dump_tasks(model_names, data, out_dir, *, shards: int = 1, **settings) -> list[DumpTask]:
    """The parts to dump: every model, split into ``shards`` parts each, in order."""
    if shards < 1:
        raise SelcalError(f"--shards must be at least 1; got {shards}")
    names = list(dict.fromkeys(model_names))
    if not names:
        raise SelcalError("no model given; name timm models, or list them one per line with --models FILE")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SelcalError(f"{out_dir}: is a file; --out-dir takes a folder (created if missing)")
    kill_marker = os.environ.get("SELCAL_TEST_KILL_SHARD_ONCE")
    tasks = []
    for name in names:
        for index in range(shards):
            out = part_path(out_dir, name, index, shards)
            tasks.append(DumpTask(name, str(data), str(out), (index, shards) if shards > 1 else None,
                                  dict(settings), kill_marker))
    return tasks


def read_model_list(path) -> list[str]:
    """Model names from a text file, one per line (blank lines and ``#`` comments skipped)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SelcalError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc}); "
                          "--models takes a text file with one timm model name per line") from None
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def run_dumps(tasks: list[DumpTask], *, engine: str = CHOICES["engine"][0], progress=None) -> list:
    """Run every part on ``engine``: a :class:`DumpSummary` or an :class:`selcal.pipeline.engines.Failure` each.

    On Ray each part is a task with one GPU when the cluster has GPUs (one CPU otherwise);
    a task whose worker dies is retried by Ray and resumes nothing (the part is written
    again from the start, under a temporary name); a rerun skips the complete parts.
    """
    from ...pipeline.engines import get_engine

    runner = get_engine(engine)
    for task in tasks:
        Path(task.out).parent.mkdir(parents=True, exist_ok=True)
    if runner.name == "ray":
        gpus = runner.gpus_available()
        return runner.run(run_dump_task, tasks, progress=progress, num_cpus=1, num_gpus=1 if gpus >= 1 else 0)
    return runner.run(run_dump_task, tasks, progress=progress)
