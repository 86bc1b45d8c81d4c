"""Engines: where independent pieces of work run (one model's evaluation, one shard of a dump).

Each piece is a pure function of its inputs, so every engine gives the same bytes; an engine
only decides where and how many at a time. ``local`` runs them in this process, one after
another. ``ray`` runs them as Ray tasks on the cluster named by ``RAY_ADDRESS`` (Ray's own
convention), or on a Ray instance started on this machine when there is none. Ray is an
optional extra (``pip install '.[ray]'``); only this module imports it, and only when the
``ray`` engine is asked for.

A piece that fails does not stop the others: its one-line error comes back as a
:class:`Failure` in its place, and the caller decides what a failure means.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import SelcalError, command_line, naming_flags

__all__ = ["Failure", "LocalEngine", "RayEngine", "ENGINES", "get_engine", "require_ray"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Failure:
    """A piece of work that failed: its index among the pieces and its one-line error."""

    index: int
    message: str


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SelcalError):
        return str(exc)
    text = " ".join(str(exc).split())[:300]
    return f"internal error ({type(exc).__name__}: {text}); please report it"


class LocalEngine:
    """Every piece in this process, in order. A piece that raises :class:`SelcalError` fails
    alone; any other exception is a bug and propagates."""

    name = "local"

    def run(self, fn: Callable[[Any], Any], items: Sequence, *, progress: Progress | None = None,
            **resources) -> list:
        out: list = []
        if progress is not None:
            progress(0, len(items))
        for index, item in enumerate(items):
            try:
                out.append(fn(item))
            except SelcalError as exc:  # a failed piece does not stop the others (a bug still raises)
                out.append(Failure(index, str(exc)))
            if progress is not None:
                progress(index + 1, len(items))
        return out


def require_ray():
    """Import Ray, or say in one line how to install it."""
    try:
        import ray
    except ImportError:
        raise SelcalError("--engine ray needs Ray: pip install ray (or, in a clone of selcal, pip install -e "
                          "'.[ray]') in selcal's environment, on every node of the cluster") from None
    return ray


def connect(ray) -> None:
    """Join the cluster of ``RAY_ADDRESS``, or start a local Ray instance when it is unset."""
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS") or None
    # Ray's own notices (e.g. "Token authentication is enabled for this Ray cluster") would reach
    # stderr raw, outside selcal's one-line contract: only its errors are let through.
    logging.getLogger("ray").setLevel(logging.ERROR)
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False,
                 configure_logging=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at RAY_ADDRESS={address}" if address else "a local Ray instance"
        raise SelcalError(f"could not connect to {where} ({' '.join(str(exc).split())[:200]}); "
                          "check the address, or unset RAY_ADDRESS to start one here") from None


def _call(fn, item, flags: bool):
    """``fn(item)`` on a Ray worker, whose messages name what the caller used (``--val`` or ``val``: a worker's
    context starts empty, so the face is sent along; :func:`selcal.errors.naming_flags`)."""
    with command_line(flags):
        return fn(item)


class RayEngine:
    """Every piece as a Ray task; results are gathered as they finish.

    ``max_retries``: how often Ray re-runs a task whose worker died (a killed process, a lost
    node). A task that raised is not retried: selcal's errors are about the input, and
    would recur.
    """

    name = "ray"

    def __init__(self, max_retries: int = 3):
        self.max_retries = max_retries

    def run(self, fn: Callable[[Any], Any], items: Sequence, *, progress: Progress | None = None,
            num_cpus: float = 1, num_gpus: float = 0) -> list:
        ray = require_ray()
        connect(ray)
        task = ray.remote(_call).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=self.max_retries,
                                         retry_exceptions=False)
        refs = [task.remote(fn, item, naming_flags()) for item in items]
        position = {ref: index for index, ref in enumerate(refs)}
        out: list = [None] * len(refs)
        pending, done = list(refs), 0
        if progress is not None:
            progress(0, len(refs))
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                index = position[ref]
                try:
                    out[index] = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                    out[index] = Failure(index, _one_line(cause))
                except ray.exceptions.RayError as exc:  # the worker died more often than it was retried
                    out[index] = Failure(index, f"the Ray worker failed ({type(exc).__name__}) after "
                                                f"{self.max_retries} retries")
                done += 1
                if progress is not None:
                    progress(done, len(refs))
        return out

    @staticmethod
    def gpus_available() -> float:
        """GPUs of the connected cluster (0 without any)."""
        ray = require_ray()
        connect(ray)
        return float(ray.cluster_resources().get("GPU", 0))


ENGINES: dict[str, type] = {"local": LocalEngine, "ray": RayEngine}


def get_engine(name: str):
    """The engine registered under ``name``."""
    if name not in ENGINES:
        raise SelcalError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
    return ENGINES[name]()
