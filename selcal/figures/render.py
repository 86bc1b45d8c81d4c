"""Which figures a result gets (:func:`plan_figures`), drawing them (:func:`render_figures`, in
parallel worker processes when there are several), and writing them (:func:`write_plots`).

The plan is a list of :class:`Job` objects: plain data (the drawing function, the indices of
the models it draws, its options), so that a job can be sent to another process. Each worker
receives the models once, when it starts; a job's figure comes back as file bytes, in the
order of the plan, whichever worker drew it. A figure drawn by a worker is byte for byte the
one drawn in the calling process (the same code, the same style, no clock or random state:
PNG, SVG and PDF are written without a date).
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..metrics import calibration
from ..errors import SelcalError
from ..pipeline.measure import logit_kind
from ..writers.output import Outputs, signals_held
from ..options import FIGURE_FAMILIES, parse_figures  # noqa: F401  (FIGURE_FAMILIES re-exported)
from ..scores import REGISTRY
from .pnorm import figure_pnorm_given_vmax, figure_pnorm_search, pnorm_rows
from .profile import figure_logit_profile, raw_logits
from .reliability import figure_reliability, figure_smooth_reliability
from .selective import figure_errors_by_group, figure_rc, figure_rc_overlay
from .sweep import figure_sweep_of
from .vmax import figure_vmax_msp, figure_vmax_msp_overlay, vmax_msp_skip_reason, vmax_stats
from .base import PLOT_FORMATS, RenderedFigure, mpl, render, safe_stem, style
from .data import DEFAULT_AT_COVERAGE, DEFAULT_MAX_POINTS, overlay_pages, vmax_msp_limits

__all__ = ["FIGURE_KINDS", "FIGURE_FAMILIES", "TILES", "Job", "ZooBoard", "board_tag", "plan_figures", "parse_kinds",
           "render_figures", "write_plots"]

# Figures of one model, one file each; FIGURE_KINDS are those every model with logits gets.
FIGURE_KINDS = ("rc", "reliability", "smooth", "vmax_msp", "pnorm_search")
OVERLAY_PROFILE_MODELS = 6  # more models: one profile figure per model only
# Figures across models made of the figures of one kind per model, side by side (the same panels,
# axes shared): the HTML report shows each model's panels once, there.
TILES = {"overlay_vmax_msp": "vmax_msp"}
# Fewer jobs than this are drawn in the calling process: starting workers costs about as much.
PARALLEL_FROM = 4


class ZooBoard(NamedTuple):
    """The models of one board (:func:`selcal.checks.common_ground.boards`) that its figures across
    models draw: its ``label`` and ``heading``, the ``indices`` into the result's models (None: every
    model), the ``note`` their captions get, ``whole``: the board's every model is drawn."""

    label: str
    heading: str
    indices: list[int] | None
    note: str = ""
    whole: bool = False


def board_tag(label: str) -> str:
    """A board's label as a part of a file name: ``K = 10`` -> ``k10``, ``6,000 rows`` -> ``6000-rows``,
    ``task arc_easy`` -> ``task-arc_easy``.

    >>> board_tag("K = 10"), board_tag("6,000 rows"), board_tag("task arc_easy")
    ('k10', '6000-rows', 'task-arc_easy')
    """
    import re

    text = re.sub(r"\s*=\s*", "", label.lower()).replace(",", "")
    return re.sub(r"[^a-z0-9._]+", "-", text).strip("-._")[:60] or "board"


def parse_kinds(text: str | Sequence[str] | None) -> frozenset[str] | None:
    """The families of ``--figures`` as a set; None for all (:func:`selcal.options.parse_figures`).

    >>> sorted(parse_kinds("rc, reliability"))
    ['rc', 'reliability']
    """
    return parse_figures(text, "--figures")


@dataclass(frozen=True)
class Job:
    """One figure to draw: ``draw(models[i], **options)`` (or ``draw([models[i], ...], **options)``
    when ``many``), written as ``stem``. Plain data, so that it can be sent to a worker."""

    stem: str
    kind: str
    family: str
    model: str | None
    caption: str
    draw: Callable
    models: tuple[int, ...]
    many: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    board: str = ""  # a figure across models of one board of several (its label), else ""


def _alphas_for(models, ls_alpha) -> list[float | None]:
    if ls_alpha is None:
        return [None] * len(models)
    if isinstance(ls_alpha, (int, float)):
        return [float(ls_alpha)] * len(models)
    values = list(ls_alpha)
    if len(values) == 1:
        return values * len(models)
    if len(values) != len(models):
        raise SelcalError(f"--ls-alpha takes one value or one per TEST file ({len(models)}); got {len(values)}")
    return values


def _validate(fmt: str, ls_alpha, at_coverage: float, n_models: int) -> list:
    if fmt not in PLOT_FORMATS:
        raise SelcalError(f"--plot-format must be one of {', '.join(PLOT_FORMATS)}; got {fmt!r}")
    if not 0 < at_coverage <= 1:
        raise SelcalError(f"--at-coverage must be a fraction in (0, 1], e.g. 0.1; got {at_coverage:g}")
    alphas = _alphas_for(range(n_models), ls_alpha)
    if any(a is not None and not 0 <= a < 1 for a in alphas):
        raise SelcalError("--ls-alpha must be in [0, 1), e.g. 0.1")
    return alphas


def _has_probability_score(model) -> bool:
    return any(getattr(REGISTRY.get(name), "has_probabilities", False) or (name not in REGISTRY and "ece" in metrics)
               for name, metrics in model.scores.items())


def plan_figures(result, *, ls_alpha=None, at_coverage: float = DEFAULT_AT_COVERAGE,
                 max_points: int | None = DEFAULT_MAX_POINTS, kinds=None, notes: list[str] | None = None,
                 overview: Sequence[int] | None = None, per_model: Sequence[int] | None = None,
                 overview_note: str = "", boards: Sequence[ZooBoard] | None = None) -> list[Job]:
    """The figures of ``result``, in the order they are written, and why others are not drawn.

    Across models, when there are several: ``overlay_rc``; ``overlay_vmax_msp`` (for more
    than ``OVERLAY_VMAX_MODELS`` models, several figures ``overlay_vmax_msp_1``, ``_2``, ...
    of :func:`~selcal.figures.data.overlay_pages` sharing their y axes); ``overlay_logit_profile``
    for 2..6 models with a profile; when rows have groups, ``errors_by_group``; a
    ``sweep_NAME`` per swept value. Per model: ``rc``, ``reliability`` and ``smooth`` (a probability score),
    ``vmax_msp`` (msp, and :func:`~selcal.figures.vmax_msp_skip_reason` allows),
    ``pnorm_search`` (pnorm fitted on validation rows), ``logit_profile`` and ``pnorm_vmax``
    (their data kept, raw logits). ``kinds``: the families to draw (:func:`parse_kinds`;
    None: all). ``notes`` receives one line per figure that is not drawn or leaves a model
    out, with the reason. Nothing is skipped silently.

    A zoo: ``overview``, the indices of the models the figures across models draw (the
    best k and any baseline; None: every model), ``overview_note`` added to their captions (which
    models, where the rest are listed); ``per_model``, the models that get their own figures
    (None: every model; the HTML report draws only those it shows). The sweep figures keep every model.
    ``boards``: several boards (models not evaluated on the same rows, :class:`ZooBoard`): the
    figures across models are drawn once per board, each of its models only (``overview`` and
    ``overview_note`` unused), captioned with its heading, its label in the file name
    (``overlay_rc_k10``, :func:`board_tag`); one board or None: ``overview``'s, as above.
    """
    notes = notes if notes is not None else []
    models = list(result.models)
    alphas = _alphas_for(models, ls_alpha)
    wanted = kinds if kinds is None else frozenset(kinds)
    bins = getattr(result.options, "bins", calibration.DEFAULT_BINS) if result.options is not None else \
        calibration.DEFAULT_BINS
    jobs: list[Job] = []
    used: set[str] = set()

    def add(kind, family, model, caption, draw, indices, many=False, stem=None, board="", **options):
        if wanted is not None and family not in wanted:
            return
        base = stem or (f"{safe_stem(models[model].name)}_{kind}" if model is not None else kind)
        unique, i = base, 2
        while unique in used:
            unique, i = f"{base}-{i}", i + 1
        used.add(unique)
        jobs.append(Job(unique, kind, family, None if model is None else models[model].name, caption, draw,
                        tuple(indices), many, options, board))

    def note(family, line):
        if wanted is None or family in wanted:
            notes.append(line)

    if boards is None or len(boards) < 2:
        boards = [ZooBoard("", "", None if overview is None else list(overview), overview_note)]
    own = set(range(len(models)) if per_model is None else per_model)
    shown: set[int] = set()
    for board in boards:
        shown |= set(range(len(models)) if board.indices is None else board.indices)
    vmax_reasons = [vmax_msp_skip_reason(m) if i in own or i in shown else None for i, m in enumerate(models)]
    tag = {board.label: "" if not board.label else "_" + board_tag(board.label) for board in boards}

    def across(board):
        """The figures across the models of one board (every board's: one board)."""
        everyone = range(len(models)) if board.indices is None else list(board.indices)
        every = board.indices is None or board.whole
        head = f"{board.heading}. " if board.heading else ""
        suffix = f" {board.note}" if board.note else ""
        end = tag[board.label]
        if len(models) > 1:
            add("overlay_rc", "rc", None, head + ("Risk–coverage of every model, one panel per score." if every
                                                  else "Risk–coverage, one panel per score.") + suffix,
                figure_rc_overlay, everyone, many=True, stem="overlay_rc" + end, board=board.label,
                max_points=max_points)
            drawn = [i for i in everyone if vmax_reasons[i] is None]
            by_reason: dict[str, list[str]] = {}
            for i in everyone:
                m, reason = models[i], vmax_reasons[i]
                if reason is not None and "msp" in m.scores:
                    by_reason.setdefault(reason, []).append(m.name)
            left_out = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
            if len(drawn) >= 2:
                if left_out:
                    note("vmax_msp", f"overlay_vmax_msp{end} leaves out {'; '.join(left_out)}")
                pages = overlay_pages(len(drawn))
                limits = None
                if len(pages) > 1 and (wanted is None or "vmax_msp" in wanted):
                    limits = vmax_msp_limits([vmax_stats(models[i]) for i in drawn])
                for number, page in enumerate(pages, 1):
                    chosen = [drawn[i] for i in page]
                    which = "" if len(pages) == 1 else \
                        f" Models {page.start + 1}–{page.stop} of {len(drawn)}; upper panels share their y axis " \
                        f"across all {len(pages)} figures."
                    add("overlay_vmax_msp", "vmax_msp", None, head + "Max logit given MSP, correct vs incorrect, "
                        "per model." + which + suffix,
                        figure_vmax_msp_overlay, chosen, many=True,
                        stem=("overlay_vmax_msp" if len(pages) == 1 else f"overlay_vmax_msp_{number}") + end,
                        board=board.label, ls_alphas=[alphas[i] for i in chosen], limits=limits,
                        page=(number, len(pages)))
            elif left_out:
                note("vmax_msp", f"overlay_vmax_msp{end} not drawn: fewer than two models can be drawn; "
                     f"{'; '.join(left_out)}")
        if any(models[i].groups is not None for i in everyone):
            add("errors_by_group", "errors_by_group", None,
                head + f"Errors accepted at {100 * at_coverage:g}% coverage, stacked by group." + suffix,
                figure_errors_by_group, everyone, many=True, stem="errors_by_group" + end, board=board.label,
                coverage=at_coverage)

    def profiles(board):
        everyone = range(len(models)) if board.indices is None else list(board.indices)
        profiled = [i for i in everyone if models[i].rows is not None and models[i].rows.profile is not None
                    and raw_logits(models[i])]
        if 1 < len(profiled) <= OVERLAY_PROFILE_MODELS:
            add("overlay_logit_profile", "logit_profile", None,
                (f"{board.heading}. " if board.heading else "")
                + "Sorted logits (v, v^p, exp v), mean ± std per rank, every model; solid: correct, "
                "dashed: incorrect.",
                figure_logit_profile, profiled, many=True, stem="overlay_logit_profile" + tag[board.label],
                board=board.label)

    for board in boards:
        across(board)
    for name in sorted({key for m in models for key in (m.extra.get("sweep") or {})}):
        swept = [i for i, m in enumerate(models) if name in (m.extra.get("sweep") or {})]
        add(f"sweep_{safe_stem(name)}", "sweep", None,
            f"Headline metrics against {name}: accuracy, AURC and coverage at risk of every score, "
            "ECE and adaptive ECE before and after temperature scaling.", figure_sweep_of, swept, many=True,
            name=name)
    for board in boards:
        profiles(board)
    for index, (model, alpha, vmax_reason) in enumerate(zip(models, alphas, vmax_reasons)):
        if index not in own:
            continue
        add("rc", "rc", index, "Risk–coverage, one curve per score.", figure_rc, [index],
            max_points=max_points)
        if _has_probability_score(model):
            if model.rows is not None:
                add("reliability", "reliability", index, "Reliability diagram and confidence histogram.",
                    figure_reliability, [index], n_bins=bins)
                add("smooth", "smooth", index, "Smoothed reliability (the curve of the smooth ECE) over the "
                    "density of confidences.", figure_smooth_reliability, [index])
            else:
                for kind in ("reliability", "smooth"):
                    note(kind, f"{safe_stem(model.name)}_{kind} not drawn: the result holds no per-row values")
        if "msp" in model.scores:
            if vmax_reason is None:
                add("vmax_msp", "vmax_msp", index, "Max logit given MSP for correct and incorrect predictions.",
                    figure_vmax_msp, [index], ls_alpha=alpha)
            else:
                note("vmax_msp", f"{safe_stem(model.name)}_vmax_msp not drawn: {vmax_reason}")
        if "pnorm" in model.scores:
            if "val_objective" in model.scores["pnorm"]:
                add("pnorm_search", "pnorm_search", index, "Validation objective of every p; MSP as a line.",
                    figure_pnorm_search, [index])
            else:
                note("pnorm_search", f"{safe_stem(model.name)}_pnorm_search not drawn: the result holds no "
                     "validation objective per p (p-norm was not fitted on validation rows)")
        rows = model.rows
        has_profile = rows is not None and rows.profile is not None
        has_pnorm = pnorm_rows(model) is not None
        if (has_profile or has_pnorm) and not raw_logits(model):
            if wanted is None or wanted & {"logit_profile", "pnorm_vmax"}:
                notes.append(f"{safe_stem(model.name)}_logit_profile and _pnorm_vmax not drawn: the logits look like "
                             f"{logit_kind(rows)}, whose sorted values and max logit say nothing beyond the MSP")
            continue
        if has_profile:
            add("logit_profile", "logit_profile", index,
                "Logits sorted high to low: mean ± std of v, v^p and exp(v) per rank, correct and incorrect apart "
                "(Xia et al. fig. 18).", figure_logit_profile, [index], many=True)
        if has_pnorm:
            add("pnorm_vmax", "pnorm_vmax", index,
                "p-norm score given the max logit within MSP bins (Xia et al. fig. 19).",
                figure_pnorm_given_vmax, [index])
    return jobs


# ------------------------------------------------------------------------ drawing
_WORKER_MODELS: list | None = None


def _draw(job: Job, models: Sequence, fmt: str) -> bytes | None:
    """The file bytes of one job's figure (None: the figure has nothing to show)."""
    matplotlib, _, _ = mpl()
    chosen = [models[i] for i in job.models]
    with matplotlib.rc_context(style()):
        figure = job.draw(chosen if job.many else chosen[0], **job.options)
        if figure is None:
            return None
        return render(figure, fmt)


def _worker_start(models: bytes) -> None:
    """A drawing worker: Ctrl-C is for the parent (which ends the workers); the models, once."""
    global _WORKER_MODELS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER_MODELS = pickle.loads(models)


def _worker_draw(task: tuple[Job, str]) -> bytes | None:
    job, fmt = task
    return _draw(job, _WORKER_MODELS, fmt)


MAX_WORKERS = 8  # each worker holds a copy of the models: memory grows with the workers


def default_workers() -> int:
    """Worker processes for drawing: the cores this process may use, at most ``MAX_WORKERS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def _context():
    """forkserver where there is one (a fork of a single-threaded server: safe although the
    parent runs threads; matplotlib, its Agg canvas and scipy.stats (the reliability diagram's
    intervals) are imported there once, not in every worker), else spawn."""
    import multiprocessing

    try:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["selcal.figures.forkserver", __name__, "matplotlib.figure",
                                        "matplotlib.backends.backend_agg", "scipy.stats"])
        return context
    except ValueError:
        return multiprocessing.get_context("spawn")


def start_forkserver(context) -> None:
    """Start ``context``'s forkserver (when it is one and not yet running) with SIGINT blocked, a mask
    that it and the workers it forks inherit: Ctrl-C reaches the whole process group and is for the
    ``selcal`` process, which ends the workers. Without it a forkserver still importing its preloaded
    modules printed a KeyboardInterrupt traceback. CPython's resource tracker is started first: starting
    it unblocks SIGINT in the calling thread, which undid a mask set around the pool's start. This
    process meanwhile gets the signal as before (on another thread, or when the mask is restored)."""
    if context.get_start_method() != "forkserver" or not hasattr(signal, "pthread_sigmask"):
        return
    from multiprocessing import forkserver, resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _drawn(jobs: Sequence[Job], models: Sequence, fmt: str, workers: int) -> Iterator[bytes | None]:
    """Each job's bytes, in the order of ``jobs``; in ``workers`` processes when that helps."""
    workers = min(workers, len(jobs))
    if workers <= 1 or len(jobs) < PARALLEL_FROM:
        for job in jobs:
            yield _draw(job, models, fmt)
        return
    shipped = pickle.dumps(list(models), protocol=pickle.HIGHEST_PROTOCOL)
    pool = None
    try:
        # A signal while the pool starts waits until it has started, so that the ``finally`` ends its workers:
        # cut in the middle, the workers already forked outlived the run and failed on its vanished semaphores.
        with signals_held():
            context = _context()
            start_forkserver(context)
            pool = context.Pool(workers, initializer=_worker_start, initargs=(shipped,))
        # One job at a time to a free worker (figures differ in cost by 10x); results in plan order.
        yield from pool.imap(_worker_draw, [(job, fmt) for job in jobs], chunksize=1)
        pool.close()
    finally:
        if pool is not None:
            with signals_held():  # no worker outlives the run, on an error or a signal
                pool.terminate()
                pool.join()


def render_figures(result, fmt: str = PLOT_FORMATS[0], *, ls_alpha=None, at_coverage: float = DEFAULT_AT_COVERAGE,
                   max_points: int | None = DEFAULT_MAX_POINTS, notes: list[str] | None = None, kinds=None,
                   workers: int = 1, progress: Callable[[int, int], None] | None = None,
                   skip_tiled: bool = False, overview: Sequence[int] | None = None,
                   per_model: Sequence[int] | None = None, overview_note: str = "",
                   boards: Sequence[ZooBoard] | None = None) -> Iterator[RenderedFigure]:
    """Every figure of :func:`plan_figures`, drawn and rendered, one at a time in plan order.

    ``workers``: processes that draw (1, the default, draws here; ``selcal evaluate`` passes
    :func:`default_workers`). More than one starts worker processes by forkserver (spawn where
    there is none), which import the calling script's main module again: a script that asks
    for workers needs the ``if __name__ == "__main__":`` guard, as for any multiprocessing.
    The bytes do not depend on ``workers``. ``progress(done, total)`` is called after each figure.
    ``notes``: see :func:`plan_figures`. ``skip_tiled`` (the HTML report, which shows a model's figure of
    a kind in :data:`TILES` only as a tile of the figure across models): such a figure is yielded with
    its caption and no bytes, undrawn, unless the figure across models has nothing to show.
    ``overview``, ``per_model``, ``overview_note``, ``boards``: a zoo's figures (see :func:`plan_figures`).
    """
    models = list(result.models)
    _validate(fmt, ls_alpha, at_coverage, len(models))
    jobs = plan_figures(result, ls_alpha=ls_alpha, at_coverage=at_coverage, max_points=max_points, kinds=kinds,
                        notes=notes, overview=overview, per_model=per_model, overview_note=overview_note,
                        boards=boards)
    if skip_tiled:
        yield from _render_untiled(jobs, models, fmt, workers, progress)
        return
    if progress is not None:
        progress(0, len(jobs))
    drawn = _drawn(jobs, models, fmt, workers)
    try:
        for done, (job, data) in enumerate(zip(jobs, drawn), 1):
            if progress is not None:
                progress(done, len(jobs))
            if data is not None:
                yield RenderedFigure(stem=job.stem, kind=job.kind, model=job.model, caption=job.caption, format=fmt,
                                     data=data, models=tuple(models[i].name for i in job.models), board=job.board)
    finally:
        drawn.close()


def _render_untiled(jobs: Sequence[Job], models: Sequence, fmt: str, workers: int,
                    progress: Callable[[int, int], None] | None) -> Iterator[RenderedFigure]:
    """render_figures' figures without drawing a model's figure that a figure across models shows
    as a tile (yielded with no bytes); one is drawn after all when its figure across models is empty."""
    tiled = {(models[i].name, TILES[job.kind]): k for k, job in enumerate(jobs) if job.kind in TILES
             for i in job.models}
    skipped = {k: tiled[job.model, job.kind] for k, job in enumerate(jobs)
               if job.model is not None and (job.model, job.kind) in tiled}
    first = [k for k in range(len(jobs)) if k not in skipped]
    total = len(first)
    if progress is not None:
        progress(0, total)
    data: dict[int, bytes | None] = {}
    drawn = _drawn([jobs[k] for k in first], models, fmt, workers)
    try:
        for done, (k, figure) in enumerate(zip(first, drawn), 1):
            data[k] = figure
            if progress is not None:
                progress(done, total)
    finally:
        drawn.close()
    for k, page in skipped.items():  # (rare) the figure across models drew nothing: the model's own, then
        data[k] = _draw(jobs[k], models, fmt) if data.get(page) is None else b""
    for k, job in enumerate(jobs):
        if data[k] is not None:
            yield RenderedFigure(stem=job.stem, kind=job.kind, model=job.model, caption=job.caption, format=fmt,
                                 data=data[k], models=tuple(models[i].name for i in job.models), board=job.board)


def write_plots(result, folder, fmt: str = PLOT_FORMATS[0], *, ls_alpha=None, at_coverage: float = DEFAULT_AT_COVERAGE,
                max_points: int | None = DEFAULT_MAX_POINTS, keep_data: bool = False,
                notes: list[str] | None = None, outputs: Outputs | None = None, kinds=None,
                workers: int = 1, progress: Callable[[int, int], None] | None = None,
                overview: Sequence[int] | None = None, overview_note: str = "",
                boards: Sequence[ZooBoard] | None = None) -> list[RenderedFigure]:
    """Write every figure of :func:`render_figures` into ``folder`` (created if missing).

    The figures appear together when all are drawn (none if one fails). Returns the figures
    with their ``path``; their bytes are kept only with ``keep_data`` (e.g. to embed them in
    an HTML report as well). ``notes`` receives the figures not drawn, with the reason (see
    :func:`plan_figures`). ``outputs``: stage the files in that transaction instead, for
    the caller to commit with its other outputs. ``kinds``, ``workers``, ``progress``: see
    :func:`render_figures`; ``overview``, ``overview_note``, ``boards``: a zoo's (:func:`plan_figures`).
    """
    if outputs is None:
        with Outputs() as own:
            return write_plots(result, folder, fmt, ls_alpha=ls_alpha, at_coverage=at_coverage,
                               max_points=max_points, keep_data=keep_data, notes=notes, outputs=own, kinds=kinds,
                               workers=workers, progress=progress, overview=overview, overview_note=overview_note,
                               boards=boards)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SelcalError(f"{folder}: is a file; --plots takes a folder")
    _validate(fmt, ls_alpha, at_coverage, len(result.models))
    outputs.folder(folder)
    written = []
    for rendered in render_figures(result, fmt, ls_alpha=ls_alpha, at_coverage=at_coverage, max_points=max_points,
                                   notes=notes, kinds=kinds, workers=workers, progress=progress, overview=overview,
                                   overview_note=overview_note, boards=boards):
        path = folder / f"{rendered.stem}.{fmt}"
        outputs.write(path, rendered.data)
        rendered.path = path
        if not keep_data:
            rendered.data = b""
        written.append(rendered)
    return written
