"""One model's evaluation as a pure function of a :class:`ModelJob` (read, split, fit, measure;
streamed when large), and the engines that run many (threads locally, tasks on Ray).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import SelcalError, said
from ..io import expand_input, open_dump
from ..io.base import release_read_buffers
from ..options import CHOICES, DEFAULT_MEMORY_BUDGET, Options, ReadSettings
from ..results import EvaluationResult, ModelResult
from .measure import evaluate_dump, scores_for_input, with_input
from .split import unique_names, prime_allocator
from .stream import evaluate_confidences, evaluate_source, read_columns

__all__ = ["DEFAULT_MEMORY_BUDGET", "ModelJob", "evaluate_model", "model_jobs", "jobs_as_read", "run_jobs"]




@dataclass(frozen=True)
class ModelJob:
    """Everything one model's evaluation needs: a pure function of it (:func:`evaluate_model`)
    gives the same bytes on any engine."""

    path: str
    val: str | None
    name: str
    options: Options
    columns: dict
    group_col: str | None = None
    stream: bool | None = None
    memory_budget: int = DEFAULT_MEMORY_BUDGET


def evaluate_model(job: ModelJob, progress: Callable[[int, int | None], None] | None = None) -> ModelResult:
    """Read, split, fit and measure one model (streamed when ``job.stream`` or too large)."""
    prime_allocator()  # (the chunk temporaries on the heap, not a fresh mmap each)
    test = open_dump(job.path, group_col=job.group_col, **job.columns)
    if progress is not None and hasattr(test, "progress"):  # a reader that reports its reading (images)
        test.progress = progress
    val_source = open_dump(job.val, **job.columns) if job.val is not None else None
    streamed = job.stream if job.stream is not None else test.logits_bytes > job.memory_budget
    if getattr(test, "confidence_only", False):
        return evaluate_confidences(test, val_source, options=job.options, name=job.name)
    if streamed:
        if test.input_kind is None and test.detected_input is None:
            next(iter(test.batches(ids=False)), None)  # the first batch says what the file holds
            release_read_buffers()  # (its decoded row group, before the validation file is read)
        kind = test.input_kind or test.detected_input or "logits"
        options, dropped = scores_for_input(job.options, kind, test.path, python=test.python)
        return with_input(evaluate_source(test, val_source, options=options, name=job.name, progress=progress),
                          kind, dropped)
    dump = test.read_all()
    options, dropped = scores_for_input(job.options, dump.input, test.path, python=test.python)
    dump.columns = read_columns(test, options)
    return with_input(evaluate_dump(dump, val_source.read_all() if val_source else None,
                                    options=options, name=job.name, progress=progress), dump.input, dropped)


def _streamed_job(job: ModelJob) -> ModelResult:
    """A model evaluated on a remote worker: always streamed, so its memory stays bounded. The
    worker loads the scores of the ``selcal.scores`` entry points, as the command line does (a
    score registered by a script's own ``register_score`` call is not known there)."""
    from ..scores import load_entry_points

    load_entry_points()
    return evaluate_model(replace(job, stream=True, options=replace(job.options, workers=1)))


def model_jobs(paths, val=None, *, options: Options, label_col: str | None = None, logits_col: str | None = None,
               ignore_label: int | None = None, group_col: str | None = None, stream: bool | None = None,
               memory_budget: int = DEFAULT_MEMORY_BUDGET, pixels_per_image: int | None = None,
               reader_settings: dict | None = None) -> list[ModelJob]:
    """One :class:`ModelJob` per model of the TEST paths (a file, a folder of parts or a glob; a
    folder of lm-evaluation-harness logs is a model per log: :func:`selcal.io.expand_input`),
    names made unique. ``reader_settings`` go to the readers that declare them (``lm_norm``)."""
    paths = [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else list(paths)
    vals = [] if val is None else ([val] if isinstance(val, (str, bytes)) or hasattr(val, "__fspath__") else list(val))
    if not paths:
        raise SelcalError("no input file given")
    if vals and len(vals) != len(paths):
        raise SelcalError(f"got {len(paths)} TEST files but {len(vals)} {said('val')} files; give one {said('val')} per "
                          "file, in the same order")
    columns = dict(label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                   pixels_per_image=pixels_per_image, seed=options.seed, **(reader_settings or {}))
    expanded = [(i, *model) for i, path in enumerate(paths) for model in expand_input(path)]
    if vals and len(expanded) != len(paths):
        raise SelcalError(f"{said('val')} cannot be given with a folder of lm-evaluation-harness logs or a log of several "
                          "choice counts; their models are fitted on a hold-out of their own rows")
    names = unique_names([path for _, path, _, _ in expanded], [name for _, _, _, name in expanded])
    return [ModelJob(path, str(vals[i]) if vals else None, names[j], options, {**columns, **settings}, group_col,
                     stream, memory_budget) for j, (i, path, settings, _) in enumerate(expanded)]


def jobs_as_read(paths, val, options: Options, read: ReadSettings) -> list[ModelJob]:
    """:func:`model_jobs` with the files read as ``read`` says (``selcal.evaluate``'s and ``selcal.study``'s)."""
    return model_jobs(paths, val, options=options, label_col=read.label_col, logits_col=read.logits_col,
                      ignore_label=read.ignore_label, group_col=read.group_col, stream=read.stream,
                      memory_budget=read.memory_budget, pixels_per_image=read.pixels_per_image,
                      reader_settings={"input_kind": read.input_kind, "lm_norm": read.lm_norm,
                                       "ood_label": read.ood_label})


def run_jobs(jobs: Sequence[ModelJob], *, engine: str = CHOICES["engine"][0],
             progress: Callable[[int, int | None], None] | None = None,
             models_progress: Callable[[int, int], None] | None = None) -> tuple[EvaluationResult, list]:
    """Evaluate every job on ``engine``: (the result of the models that succeeded, the failures).

    A model that fails does not stop the others; each failure is an
    :class:`selcal.pipeline.engines.Failure` whose ``index`` is the job's. The local engine reports
    rows of a single model to ``progress``; every engine reports models done to
    ``models_progress``.
    """
    from .engines import LocalEngine, get_engine

    runner = get_engine(engine)
    if isinstance(runner, LocalEngine):
        outcomes = runner.run(lambda job: evaluate_model(job, progress if len(jobs) == 1 else None), jobs,
                              progress=models_progress)
    else:
        outcomes = runner.run(_streamed_job, jobs, progress=models_progress)
    from .engines import Failure

    models = [o for o in outcomes if not isinstance(o, Failure)]
    failures = [o for o in outcomes if isinstance(o, Failure)]
    options = jobs[0].options if jobs else None
    return EvaluationResult(models=models, options=options), failures
