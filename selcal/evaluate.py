"""The evaluation pipeline: split, fit on validation rows, reduce the evaluation rows, measure.

Arrays in, result objects out; files are read by :mod:`selcal.io` and rendered by
:mod:`selcal.report`. The evaluation logits are visited once, in row chunks, and reduced
to a few float64 numbers per row and score; every metric is computed from those.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace

import numpy as np

from . import calibration, diagnostics, scores, selective
from .metrics import catalog
from .scores import REGISTRY, fits as posthoc
from .scores.functions import ChunkTerms
from .errors import OptionError, SelcalError
from .identity import identity_hashes
from .io import Dump, DumpSource, expand_binary, expand_input, open_dump
from .io import fdshifts, lmeval
from .io.base import nothing_left_message, splitmix64
from .io.parquet import parquet_schema_metadata
from .io.parts import SPLIT_NAMES_KEY
from .io.text import SUFFIXES as TEXT_SUFFIXES
from .options import DEFAULT_COVERAGES, DEFAULT_P_GRID, DEFAULT_RISKS, MAX_BINS, MAX_P, MAX_P_GRID_VALUES, Options, \
    parse_floats, parse_p_grid  # noqa: F401  (re-exported: selcal.evaluate.Options)
from .report import EvaluationResult, ModelResult

__all__ = ["Options", "evaluate", "evaluate_dump", "evaluate_arrays", "measure_arrays", "holdout_mask", "ModelJob", "evaluate_model",
           "model_jobs", "run_jobs"]

_CHUNK_ELEMENTS = scores.CHUNK_ELEMENTS  # logits per row chunk
DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes of logits above which a file is streamed


# ------------------------------------------------------------------------ splitting
_MASK64 = (1 << 64) - 1


def row_hashes(logits: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """A seeded 64-bit hash of each row's content (logits as float64, label): the leak check
    and the subsampling of large dumps use it; the hold-out never does (it hashes the row's
    identity, :mod:`selcal.identity`)."""
    rng = np.random.default_rng(seed)
    multipliers = rng.integers(0, 2**63, size=logits.shape[1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    label_multiplier = np.uint64(int(rng.integers(0, 2**63)) * 2 + 1)
    out = np.empty(labels.size, dtype=np.uint64)
    step = max(1, _CHUNK_ELEMENTS // logits.shape[1])
    with np.errstate(over="ignore"):
        for start in range(0, labels.size, step):
            chunk = logits[start:start + step].astype(np.float64) + 0.0  # -0.0 -> 0.0
            bits = splitmix64(chunk.view(np.uint64))
            mixed = (bits * multipliers).sum(axis=1, dtype=np.uint64)
            mixed += labels[start:start + step].astype(np.uint64) * label_multiplier
            out[start:start + step] = splitmix64(mixed)
    return out


def holdout_mask(n_rows: int, ids: np.ndarray | None, fraction: float, seed: int, where: str = "") -> np.ndarray:
    """Boolean mask of the round(fraction * N) rows held out for validation: the smallest
    seeded hashes of the rows' identity (their ids, else their positions; never their content),
    so dumps of one data set hold out the same rows whatever their logits (CONVENTIONS.md,
    "Validation split")."""
    return _lowest_hashes(identity_hashes(n_rows, ids, seed), fraction, where)


def _lowest_hashes(hashes: np.ndarray, fraction: float, where: str = "") -> np.ndarray:
    """Mask of the round(fraction * N) rows with the smallest hashes."""
    n = hashes.size
    n_val = int(math.floor(fraction * n + 0.5))
    if n_val < 1 or n_val > n - 1:
        raise SelcalError(
            (f"{where}: " if where else "") + f"a random hold-out of {fraction:g} x {n} rows leaves no validation or no evaluation rows; "
            "give a larger file, --val FILE, or a split column"
        )
    mask = np.zeros(n, dtype=bool)
    mask[np.argsort(hashes, kind="stable")[:n_val]] = True
    return mask


def _rows_of(dump: Dump, wanted: str) -> Dump:
    """The rows of ``dump`` whose split is ``wanted``, or all rows when it has no such rows."""
    if dump.split is None:
        return dump
    mask = dump.split == wanted
    return dump.subset(mask) if mask.any() else dump


def split_plan(split: np.ndarray | None, has_val_file: bool, needs_validation: bool,
               holdout: Callable[[], np.ndarray]) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """(rule, validation-row mask, evaluation-row mask) over the TEST rows, by the precedence of
    CONVENTIONS.md: a --val file, else the split column, else a hold-out (``holdout()`` gives
    its mask). A mask of None means no such rows (validation) or every row (evaluation).
    The one place the rule is written; both evaluation paths follow it.
    """
    if has_val_file:
        has_test_rows = split is not None and (split == "test").any()
        return "val-file", None, (split == "test") if has_test_rows else None
    if split is not None:
        is_val = split == "val"
        if is_val.any() and (~is_val).any():
            return "split-column", is_val, ~is_val
    if not needs_validation:
        return "none", None, None
    val_mask = holdout()
    return "holdout", val_mask, ~val_mask


def _rule_name(rule: str, by_image: bool, metadata: dict) -> str:
    """The reported split rule: a hold-out of pixel rows is by image; a split column that the
    parts' file or folder names gave is ``split-names``."""
    if rule == "holdout" and by_image:
        return "image-holdout"
    if rule == "split-column" and (metadata or {}).get(SPLIT_NAMES_KEY):
        return "split-names"
    return rule


def _check_same_classes(test_path: str, test_classes: int, val_path: str, val_classes: int) -> None:
    if max(val_classes, 2) != max(test_classes, 2):  # one binary logit is K = 2
        raise SelcalError(f"{val_path}: has K = {val_classes} classes but {test_path} has K = {test_classes}; "
                          "pass the validation file of the same model")


def image_holdout_mask(images: np.ndarray, names: np.ndarray, fraction: float, seed: int, where: str = "") -> np.ndarray:
    """Row mask of the pixel rows held out for validation: those of a seeded ``fraction`` of
    the images that have rows (chosen by a hash of the image id, independent of order)."""
    from .io.segmentation import image_holdout

    present = np.unique(images)
    try:
        chosen = image_holdout(names[present], fraction, seed)
    except ValueError:
        raise SelcalError((f"{where}: " if where else "") + f"a random hold-out of {fraction:g} x {present.size} "
                          "images leaves no validation or no evaluation images; give more images or --val FOLDER/"
                          ) from None
    by_image = np.zeros(names.size, dtype=bool)
    by_image[present[chosen]] = True
    return by_image[images]


def split_rows(test: Dump, val: Dump | None, options: Options,
               by_position: bool = False) -> tuple[Dump | None, Dump, str]:
    """(validation rows, evaluation rows, rule) of an in-memory dump (see :func:`split_plan`).

    Pixel rows of images (``test.images``) are held out by image, never by pixel (rule
    ``image-holdout``); other rows by their ids, or by position when there are none or
    ``by_position`` says the ids are only row numbers selcal made.
    """
    if val is not None:
        _check_same_classes(test.path, test.num_classes, val.path, val.num_classes)
    if test.images is not None:
        holdout = lambda: image_holdout_mask(test.images, test.image_names, options.val_fraction,  # noqa: E731
                                             options.seed, where=test.path)
    else:
        holdout = lambda: holdout_mask(len(test), None if by_position else test.ids,  # noqa: E731
                                       options.val_fraction, options.seed, where=test.path)
    rule, val_mask, eval_mask = split_plan(test.split, val is not None, options.needs_validation, holdout)
    rule = _rule_name(rule, test.images is not None, test.metadata)
    val_rows = _rows_of(val, "val") if val is not None else None if val_mask is None else test.subset(val_mask)
    return val_rows, test if eval_mask is None else test.subset(eval_mask), rule


# ------------------------------------------------------------------------ reduction
@dataclass
class ScoreRows:
    """Per-row numbers of one score on the evaluation rows.

    ``values``: the confidence as ranked; ``confidence``: its top-label probability (scores
    with probabilities; for the calibration metrics); ``correct``, ``pred``: its own errors and
    predictions (a score whose probabilities have their own argmax), else None (the model's);
    ``nll``, ``brier``, ``classwise``: from its probabilities, when the score reports them.
    """

    values: np.ndarray
    confidence: np.ndarray | None = None
    correct: np.ndarray | None = None
    pred: np.ndarray | None = None
    nll: np.ndarray | None = None
    brier: np.ndarray | None = None
    classwise: calibration.ClasswiseBins | None = None


@dataclass
class RowReduction:
    """Per-row numbers of the evaluation rows (the model's, then each score's), plus additive class-wise bins."""

    correct: np.ndarray
    log_msp: np.ndarray
    max_logit: np.ndarray
    nll: np.ndarray
    brier: np.ndarray
    looks_like_probabilities: np.ndarray  # non-negative, sums to 1
    label_is_pred_plus_one: np.ndarray  # for the 1-based label check
    classwise: calibration.ClasswiseBins
    top5: np.ndarray | None = None  # label among the 5 largest logits (K >= 5 only)
    scores: dict[str, ScoreRows] = field(default_factory=dict)  # every chosen score, by name
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # further per-row arrays of scores (figures)
    pred: np.ndarray | None = None  # argmax (int32), for the confident-errors table
    label: np.ndarray | None = None  # label (int32)
    profile: np.ndarray | None = None  # (n_sample, R) largest logits, highest first, of sampled rows
    profile_correct: np.ndarray | None = None

    @property
    def pnorm(self) -> np.ndarray | None:
        """The p-norm score at the fitted p (also when it falls back to MSP, with the logit profile)."""
        return self.extra.get("pnorm")


def _probability_terms(logits, labels, inverse_temperature, n_bins, pred=None, terms=None, wanted=("nll", "brier", "cece")):
    """log-MSP, NLL, Brier per row and class-wise bins for softmax(beta v) (those not ``wanted``: None).

    Brier is sum_k (p_k - [y = k])^2 written with S = sum_{k != pred} exp(beta (v_k - v_max))
    so that no term cancels when p_y is close to 1.
    """
    pred, exps, rest = terms if terms is not None else scores.softmax_terms(logits, inverse_temperature, pred)
    if not wanted:
        return pred, -np.log1p(rest), None, None, None
    rows = np.arange(labels.size)
    hit = pred == labels
    exp_label = exps[rows, labels]  # 0 where the label is the prediction
    denominator = 1.0 + rest
    off_label = np.where(hit, rest, denominator - exp_label)
    squares = np.einsum("ij,ij->i", exps, exps)
    off_label_squares = np.where(hit, squares, 1.0 + squares - exp_label * exp_label)
    brier = (off_label * off_label + off_label_squares) / (denominator * denominator)
    gap = logits[rows, pred] - logits[rows, labels]
    nll = inverse_temperature * gap + np.log1p(rest)
    probabilities = exps
    probabilities /= denominator[:, None]
    probabilities[rows, pred] = 1.0 / denominator
    bins = calibration.classwise_update(probabilities, labels, n_bins)
    return pred, -np.log1p(rest), nll, brier, bins


TOP_K = 5


def in_top_k(logits: np.ndarray, labels: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Whether each row's label is among its ``k`` largest logits, ties broken toward the
    lower class index as argmax breaks them.

    The label's rank (from 0) is the number of logits strictly above v_y plus the number
    equal to v_y at a lower class index; the row counts when that rank is below ``k``.
    One comparison per logit decides the rows with fewer than ``k`` other logits >= v_y;
    the others (few, for a useful model) are compared again, and their equal logits looked
    at only where they can decide it.

    Examples
    --------
    >>> logits = np.array([[1.0, 3.0, 3.0, 0.0], [1.0, 3.0, 3.0, 0.0]])
    >>> in_top_k(logits, np.array([1, 2]), k=1).tolist()
    [True, False]
    """
    rows = np.arange(labels.size)
    target = logits[rows, labels][:, None]
    others_at_least = np.count_nonzero(logits >= target, axis=1) - 1  # the rank is at most this
    inside = others_at_least < k
    doubt = np.flatnonzero(~inside)  # usually few rows: the rest are decided by one comparison
    if doubt.size:
        sub, sub_labels, sub_target = logits[doubt], labels[doubt], target[doubt]
        above = np.count_nonzero(sub > sub_target, axis=1)
        tied = others_at_least[doubt] - above  # other classes equal to v_y
        unsure = np.flatnonzero((tied > 0) & (above < k))
        if unsure.size:
            before = (sub[unsure] == sub_target[unsure]) & (np.arange(logits.shape[1]) < sub_labels[unsure, None])
            above[unsure] += np.count_nonzero(before, axis=1)
        inside[doubt] = above < k
    return inside


def _probabilities_terms(probabilities: np.ndarray, labels: np.ndarray, n_bins: int, wanted) -> tuple:
    """Own prediction, top-label probability, NLL, Brier and class-wise bins of N x K probabilities
    (a score registered with ``probabilities``); NLL is infinite where the label has probability 0."""
    rows = np.arange(labels.size)
    pred = np.argmax(probabilities, axis=1)
    top = probabilities[rows, pred]
    nll = brier = bins = None
    if "nll" in wanted:
        with np.errstate(divide="ignore"):
            nll = -np.log(probabilities[rows, labels])
    if "brier" in wanted:
        off = probabilities.copy()
        off[rows, labels] -= 1.0
        brier = np.einsum("ij,ij->i", off, off)
    if "cece" in wanted:
        bins = calibration.classwise_update(np.clip(probabilities, 0.0, 1.0), labels, n_bins)
    return pred, top, nll, brier, bins


def _score_chunk(entry, terms: ChunkTerms, labels: np.ndarray, state, options: Options, out: dict) -> None:
    """The per-row numbers of one score on a chunk, into ``out`` (keys ``field:name``)."""
    name = entry.name
    if entry.score is not None:
        out[f"values:{name}"] = entry.score(terms, state)
    if entry.extra_rows is not None:
        out.update({f"extra:{key}": values for key, values in entry.extra_rows(terms, state, options).items()})
    if entry.probabilities is not None:
        pred, top, nll, brier, bins = _probabilities_terms(entry.probabilities(terms, state), labels, options.bins,
                                                           entry.reports)
        out[f"confidence:{name}"] = top
        out.setdefault(f"values:{name}", top)
        if entry.own_predictions:
            out[f"correct:{name}"], out[f"pred:{name}"] = pred == labels, pred.astype(np.int32)
    elif entry.softmax is not None:
        z, beta, pred = entry.softmax(terms, state)
        if z is terms.logits and beta == 1.0:  # the model's own softmax: its numbers are the model's
            out[f"base:{name}"] = True
            return
        pred, log_top, nll, brier, bins = _probability_terms(z, labels, beta, options.bins, pred, wanted=entry.reports)
        out[f"log_confidence:{name}"] = log_top
        out.setdefault(f"values:{name}", log_top)
        if entry.own_predictions:
            out[f"correct:{name}"], out[f"pred:{name}"] = pred == labels, pred.astype(np.int32)
    else:
        return
    for key, value in (("nll", nll), ("brier", brier), ("classwise", bins)):
        if value is not None:
            out[f"{key}:{name}"] = value


def _reduce_chunk(chunk, labels, options: Options, states: dict, sample_below=None) -> dict:
    """Per-row numbers of one chunk of evaluation rows (float64 from here on).

    Every chosen score reads the chunk's shared softmax terms (:class:`ChunkTerms`); the
    model's own NLL, Brier and class-wise bins come last, as they reuse the terms' memory.
    ``sample_below``: with ``options.logit_profile``, keep the sorted logits of the rows whose
    content hash is below it (None: of every row).
    """
    chunk = np.asarray(chunk, dtype=np.float64)
    terms = ChunkTerms(chunk)
    out: dict = {}
    for name in options.scores:
        _score_chunk(REGISTRY[name], terms, labels, states.get(name), options, out)
    pred, log_msp, nll, brier, bins = _probability_terms(chunk, labels, 1.0, options.bins, terms=terms.softmax)
    for name in options.scores:
        if out.pop(f"base:{name}", False):
            out[f"log_confidence:{name}"] = out.setdefault(f"values:{name}", log_msp)
            wanted = REGISTRY[name].reports
            for key, value in (("nll", nll), ("brier", brier), ("cece", bins)):
                if key in wanted:
                    out[f"{'classwise' if key == 'cece' else key}:{name}"] = value
    out.update({"correct": pred == labels, "log_msp": log_msp, "max_logit": terms.top,
                "nll": nll, "brier": brier,
                "looks_like_probabilities": (chunk.min(axis=1) >= 0) & (np.abs(chunk.sum(axis=1) - 1) < 1e-3),
                "label_is_pred_plus_one": pred + 1 == labels, "classwise": bins})
    if options.errors_top:
        out["pred"], out["label"] = pred.astype(np.int32), labels.astype(np.int32)
    if options.logit_profile:
        # a hash seeded apart from the hold-out's, whose lowest hashes are the validation rows
        keep = slice(None) if sample_below is None else row_hashes(chunk, labels, options.seed + 1) < sample_below
        out["profile"] = (diagnostics.top_sorted_logits(chunk[keep]), out["correct"][keep])
    if chunk.shape[1] >= TOP_K:
        out["top5"] = in_top_k(chunk, labels)
    return out


def rows_per_chunk(n_classes: int, options: Options) -> int:
    return options.chunk_rows or max(1, min(1 << 20, _CHUNK_ELEMENTS // n_classes))


def array_chunks(logits: np.ndarray, labels: np.ndarray, rows: int):
    """(logits, labels) chunks of at most ``rows`` rows of in-memory arrays."""
    for start in range(0, labels.size, rows):
        yield logits[start:start + rows], labels[start:start + rows]


def reduce_rows(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]],
    n_classes: int,
    *,
    options: Options,
    states: dict | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    total: int | None = None,
) -> RowReduction:
    """One pass over the evaluation logits, chunk by chunk, to per-row numbers.

    ``states``: the fitted state of each fitted score (:func:`fit_scores`). Chunks are reduced
    on ``options.workers`` threads (numpy releases the GIL) with at most a few chunks in
    flight, so memory stays bounded for a streamed file. ``progress(rows_done, total)`` is
    called after each chunk. Per-row numbers do not depend on the chunking and the class-wise
    bins are exact integers, so the result is bit-for-bit the same for any chunk size and
    thread count.
    """
    states = states or {}
    parts: dict[str, list[np.ndarray]] = {}
    filled: dict[str, np.ndarray] = {}  # with a known total, per-row numbers go straight into place
    bins: dict[str, calibration.ClasswiseBins] = {}
    done = 0

    def collect(out: dict, n_rows: int) -> None:
        nonlocal done
        if "profile" in out:
            profile_parts.append(out.pop("profile"))
        for name, values in out.items():
            if isinstance(values, calibration.ClasswiseUpdate):
                if name not in bins:
                    bins[name] = calibration.empty_classwise_bins(n_classes, options.bins)
                bins[name] += values
            elif total is None:
                parts.setdefault(name, []).append(values)
            else:
                if name not in filled:
                    filled[name] = np.empty(total, dtype=values.dtype)
                filled[name][done:done + n_rows] = values
        done += n_rows
        if progress is not None:
            progress(done, total)

    sample_below = None
    profile_parts: list = []
    if options.logit_profile and total is not None and total > diagnostics.PROFILE_ROWS:
        sample_below = np.uint64(min(2**64 - 1, int(2**64 * diagnostics.PROFILE_ROWS / max(total or 1, 1))))
    workers = options.workers or min(4, os.cpu_count() or 1)
    if workers <= 1:
        for chunk, labels in chunks:
            collect(_reduce_chunk(chunk, labels, options, states, sample_below), len(labels))
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pending: deque = deque()
            for chunk, labels in chunks:
                pending.append((pool.submit(_reduce_chunk, chunk, labels, options, states, sample_below),
                                len(labels)))
                if len(pending) > workers:
                    future, n_rows = pending.popleft()
                    collect(future.result(), n_rows)
            while pending:
                future, n_rows = pending.popleft()
                collect(future.result(), n_rows)
    if done == 0:
        raise SelcalError("no evaluation rows")
    if total is not None and done != total:
        raise AssertionError(f"reduced {done} rows, expected {total}")
    joined = filled if total is not None else {name: np.concatenate(values) for name, values in parts.items()}
    per_score: dict[str, dict] = {}
    extra = {}
    for key in [k for k in list(joined) + list(bins) if ":" in k]:
        field_name, _, name = key.partition(":")
        value = joined.pop(key) if key in joined else bins.pop(key)
        if field_name == "extra":
            extra[name] = value
            continue
        if field_name == "log_confidence":
            field_name, value = "confidence", np.exp(value)
        per_score.setdefault(name, {})[field_name] = value
    if profile_parts:
        joined["profile"] = np.concatenate([top for top, _ in profile_parts])
        joined["profile_correct"] = np.concatenate([hit for _, hit in profile_parts])
    return RowReduction(classwise=bins["classwise"], extra=extra, **joined,
                        scores={name: ScoreRows(**per_score[name]) for name in options.scores})


# ------------------------------------------------------------------------- metrics
def _score_metrics(score: np.ndarray, correct: np.ndarray, options: Options):
    curve = selective.risk_coverage(score, correct)
    metrics = selective.selective_metrics(
        curve, risks=options.risks, coverages=options.coverages, estimator=options.aurc_estimator
    )
    return curve, metrics


def _calibration_metrics(confidence: np.ndarray, correct: np.ndarray, options: Options) -> dict[str, float]:
    """Every metric of a top-label confidence in the catalog (ECE, adaptive ECE by
    ``options.aece_estimator``, MCE, ...)."""
    return {metric.key: metric.compute(confidence, correct, options) for metric in catalog.confidence_metrics()}


def measure_arrays(
    logits: np.ndarray,
    labels: np.ndarray,
    val_logits: np.ndarray | None = None,
    val_labels: np.ndarray | None = None,
    *,
    options: Options = Options(),
    name: str = "model",
    path: str = "",
    split: str = "none",
    warnings: Sequence[str] = (),
    extra: dict | None = None,
    groups: np.ndarray | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    columns: dict[str, np.ndarray] | None = None,
    clusters: np.ndarray | None = None,
    ids: np.ndarray | None = None,
    image_names: np.ndarray | None = None,
) -> ModelResult:
    """Every metric of CONVENTIONS.md for one model, from validated numpy arrays already split
    (the core of :func:`evaluate_dump`; from Python, use :func:`evaluate_arrays`).

    ``logits`` (N, K) and ``labels`` (N,) are the evaluation rows; ``val_logits`` and
    ``val_labels`` the validation rows the ``pnorm`` and ``temp`` scores are fitted on.
    ``groups`` (N,), optional, names a group per evaluation row (e.g. the source data
    set); each group then gets its own accuracy and selective metrics under ``groups``.
    ``clusters`` (N,), optional, the image of each pixel row: ``--bootstrap`` then
    resamples images, not rows. ``columns`` maps the names in ``options.score_cols`` and
    ``options.uncertainty_cols`` to their values on the evaluation rows.
    ``ids`` (N,), optional, names the evaluation rows in the most-confident-errors table
    (by default, their index in ``logits``); with ``clusters`` and ``image_names`` (the name of
    each cluster index), the table also names the image of each pixel row.
    """
    labels = np.asarray(labels, dtype=np.int64)
    warnings = list(warnings)
    n_val = 0 if val_labels is None else int(np.asarray(val_labels).size)
    states = fit_scores(val_logits, val_labels, options, where=path or name, warnings=warnings)
    chunks = array_chunks(logits, labels, rows_per_chunk(logits.shape[1], options))
    result = _measure(chunks, logits.shape[1], states, options=options, name=name,
                      path=path, split=split, n_val=n_val, warnings=warnings, extra=extra, groups=groups, progress=progress,
                      total=labels.size, columns=columns,
                      ids_of=(lambda rows: rows) if ids is None else (lambda rows: ids[rows]),
                      images_of=None if clusters is None or image_names is None else
                      (lambda rows: np.asarray(image_names)[np.asarray(clusters)[rows]]))
    result.clusters = clusters
    return result


def fit_scores(val_logits, val_labels, options: Options, *, where: str = "", warnings: list[str] | None = None) -> dict:
    """The state of every chosen fitted score (name -> what its ``fit`` returned), fitted on the
    validation rows only; the warnings the fits find go into ``warnings``."""
    fitted = scores.fitted(options.scores)
    if not fitted:
        return {}
    if val_labels is None or np.asarray(val_labels).size == 0:
        raise SelcalError(f"{where}: the {' and '.join(fitted)} score{'s' if len(fitted) > 1 else ''} need"
                          f"{'' if len(fitted) > 1 else 's'} validation rows; give --val FILE, "
                          "a split column, or use --scores msp,max_logit")
    val_logits = np.asarray(val_logits)  # as stored (e.g. float32): the fits convert row chunks to float64
    val_labels = np.asarray(val_labels, dtype=np.int64)
    states = {}
    for name in fitted:
        entry = REGISTRY[name]
        states[name] = entry.fit(val_logits, val_labels, options)
        if entry.warnings is not None and warnings is not None:
            warnings.extend(entry.warnings(states[name]))
    return states


def _measure(chunks, n_classes: int, states: dict, *, options: Options, name: str, path: str, split: str,
             n_val: int, warnings: list[str], extra: dict | None, groups, progress, total: int | None = None,
             columns: dict | None = None,
             ids_of: Callable[[np.ndarray], np.ndarray] | None = None,
             images_of: Callable[[np.ndarray], np.ndarray] | None = None) -> ModelResult:
    """Reduce the evaluation chunks and compute every metric from the per-row numbers."""
    rows = reduce_rows(chunks, n_classes, options=options, states=states, progress=progress, total=total)
    correct = rows.correct
    n = correct.size
    warnings.extend(data_warnings(rows, options.scores, log_probabilities=bool((extra or {}).get("ensemble"))))
    result = ModelResult(
        name=name, path=path, num_classes=int(n_classes), n_eval=n, n_val=n_val, split=split,
        accuracy=float(np.count_nonzero(correct) / n),
        top5_accuracy=None if rows.top5 is None else float(np.count_nonzero(rows.top5) / n),
        error=float(np.count_nonzero(~correct) / n),
        nll=scores.exact_mean(rows.nll), brier=scores.exact_mean(rows.brier),
        cece=calibration.classwise_calibration_error(rows.classwise),
        warnings=warnings, extra=dict(extra or {}), rows=rows,
    )
    for score_name in options.scores:
        entry, score_rows, state = REGISTRY[score_name], rows.scores[score_name], states.get(score_name)
        own = score_rows.correct if score_rows.correct is not None else correct
        curve, metrics = _score_metrics(score_rows.values, own, options)
        measured: dict = {}
        if score_rows.confidence is not None:
            metrics.update(_calibration_metrics(score_rows.confidence, own, options))
            result.confidences[score_name] = score_rows.confidence
            if score_rows.correct is not None:
                measured["accuracy"] = float(np.count_nonzero(own) / n)
                result.score_correct[score_name] = own
            if score_rows.nll is not None:
                measured["nll"] = scores.exact_mean(score_rows.nll)
            if score_rows.brier is not None:
                measured["brier"] = scores.exact_mean(score_rows.brier)
            if score_rows.classwise is not None:
                measured["cece"] = calibration.classwise_calibration_error(score_rows.classwise)
        metrics.update(entry.json_keys(state, measured))
        result.add_score(score_name, metrics, curve, score_rows.values)
        if entry.needs_fit:
            result.states[score_name] = state
    _add_column_scores(result, columns or {}, options)
    if groups is not None:
        result.groups = np.asarray(groups)
        result.extra["groups"] = _group_metrics(result, options)
    if options.errors_top:
        result.confident_errors = _confident_errors(result, options.errors_top, ids_of or (lambda r: r), images_of)
    return result


def _add_column_scores(result: ModelResult, columns: dict, options: Options) -> None:
    """The scores read from columns of the TEST file (``--score-col``, ``--uncertainty-col``).

    An uncertainty u is ranked as the confidence -u (exact). A confidence column whose values
    all lie in [0, 1] is read as the probability that the prediction is correct and also gets
    ECE, adaptive ECE and MCE.
    """
    correct = result.rows.correct
    for name in options.score_cols + options.uncertainty_cols:
        if name not in columns:
            raise SelcalError(f"score column '{name}': no values were given for it; score columns are read from "
                              "the TEST file (selcal.evaluate, or measure_arrays(..., columns={name: values}))")
        values = np.asarray(columns[name], dtype=np.float64)
        if values.size != correct.size:
            raise AssertionError(f"column {name}: {values.size} values for {correct.size} evaluation rows")
        uncertainty = name in options.uncertainty_cols
        score = -values if uncertainty else values
        curve, metrics = _score_metrics(score, correct, options)
        probability = not uncertainty and bool(values.size) and values.min() >= 0.0 and values.max() <= 1.0
        metrics.update(column=name, orientation="uncertainty" if uncertainty else "confidence",
                       probability_of_correct=probability)
        if probability:
            metrics.update(_calibration_metrics(values, correct, options))
        result.add_score(name, metrics, curve, score)


def _confident_errors(result: ModelResult, top: int, ids_of, images_of=None) -> dict:
    """The most confident errors of every score (see :func:`selcal.diagnostics.confident_errors`)."""
    rows = result.rows
    out = {}
    for name, values in result.score_values.items():
        entry = REGISTRY.get(name)
        own = entry is not None and name in result.score_correct
        out[name] = diagnostics.confident_errors(
            values, result.score_correct.get(name, rows.correct), top, curve=result.curves[name], ids_of=ids_of,
            labels=rows.label, predictions=rows.scores[name].pred if own else rows.pred,
            probability=entry is not None and entry.is_probability(result.scores[name]), images_of=images_of)
    return out


def _group_metrics(result: ModelResult, options: Options) -> dict[str, dict]:
    """Accuracy and the selective metrics of every score, within each group's rows."""
    correct = result.rows.correct
    out = {}
    for group in sorted(set(result.groups.tolist())):
        members = result.groups == group
        group_correct = correct[members]
        out[group] = {
            "n_eval": int(members.sum()),
            "accuracy": float(np.count_nonzero(group_correct) / group_correct.size),
            "scores": {
                name: _score_metrics(values[members], result.score_correct.get(name, correct)[members], options)[1]
                for name, values in result.score_values.items()
            },
        }
    return out


def _and(names: Sequence[str]) -> str:
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def logit_kind(rows: RowReduction) -> str:
    """What the logit column seems to hold: ``"probabilities"`` (non-negative, rows sum to 1
    on more than 99% of rows), ``"log-probabilities"`` (logsumexp = 0 on more than 99% of
    rows) or ``"logits"``. In the first two the max logit is not a logit (plots skip vmax_msp)."""
    if rows.looks_like_probabilities.mean() > 0.99:
        return "probabilities"
    if (np.abs(rows.max_logit - rows.log_msp) < 1e-4).mean() > 0.99:  # logsumexp(v) = 0
        return "log-probabilities"
    return "logits"


def data_warnings(rows: RowReduction, chosen: Sequence[str] = (), log_probabilities: bool = False) -> list[str]:
    """Signs that the dump holds something other than logits and 0-based labels.

    ``chosen``: the scores evaluated (the log-probabilities warning names those that read
    the logits' scale, ``raw_logits`` in the registry). ``log_probabilities``: the dump says
    it holds log-probabilities (an ensemble written by ``selcal ensemble``), so they are not
    warned about.
    """
    warnings = []
    kind = logit_kind(rows)
    if kind == "probabilities":
        warnings.append("the logits look like probabilities (non-negative, rows sum to 1): "
                        "save logits, or log-probabilities, instead")
    elif kind == "log-probabilities" and not log_probabilities:
        right = [n for n in chosen if not REGISTRY[n].raw_logits]
        wrong = [n for n in chosen if REGISTRY[n].raw_logits] or [n for n in REGISTRY if REGISTRY[n].raw_logits]
        warnings.append("the logits look like log-probabilities (logsumexp = 0 on every row): "
                        + (f"{_and(right)} {'is' if len(right) == 1 else 'are'} right, but " if right else "")
                        + f"{_and(wrong)} {'is' if len(wrong) == 1 else 'are'} not meaningful")
    accuracy = rows.correct.mean()
    shifted_accuracy = rows.label_is_pred_plus_one.mean()
    if shifted_accuracy > max(2 * accuracy, 0.5):
        warnings.append(f"the labels look 1-based: label = prediction + 1 on {100 * shifted_accuracy:.1f}% "
                        f"of rows, label = prediction on {100 * accuracy:.1f}%; subtract 1 from the labels")
    return warnings


def check_ids(test_path: str, test_ids, val_path: str | None = None, val_ids=None, test_split=None,
              val_split=None) -> None:
    """Refuse duplicate ids within a file (within one split of it, when it has a split column).

    Ids are unique within a file only: a --val file may reuse its TEST file's ids (both
    often hold row numbers 0 .. N-1), and so may the val and test rows of one file; a real
    leak is found by content instead (:func:`count_shared_rows`).
    """
    for path, ids, split in ((test_path, test_ids, test_split), (val_path, val_ids, val_split)):
        if ids is None:
            continue
        keys = ids if split is None else np.char.add(np.char.add(split.astype(str), "\x00"), ids.astype(str))
        unique, counts = np.unique(keys, return_counts=True)
        if (counts > 1).any():
            rows = np.flatnonzero(keys == unique[counts > 1][0])[:2].tolist()
            where = "" if split is None else f" of the split '{split[rows[1]]}'"
            raise SelcalError(f"{path}: column 'id', row {rows[1]}: id {str(ids[rows[1]])!r} also at row "
                              f"{rows[0]}{where}; every row needs its own id")


_LEAK_SEED = 0


def content_hashes(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's content (logits and label), to find rows present in two files."""
    return row_hashes(logits, labels, _LEAK_SEED)


def _probe_keys(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A cheap 64-bit key of each row: its label and three of its logits (first, middle, last).

    Rows with equal content have equal keys, so only rows whose keys match need their whole
    content hashed: O(N) work instead of O(N x K) when, as usual, no row is shared.
    """
    columns = sorted({0, logits.shape[1] // 2, logits.shape[1] - 1})
    return row_hashes(logits[:, columns], labels, _LEAK_SEED + 1)


class SharedRows:
    """The validation rows, indexed to count evaluation rows with exactly their logits and label."""

    def __init__(self, logits: np.ndarray, labels: np.ndarray):
        self.logits, self.labels = logits, labels
        self.keys = _probe_keys(logits, labels) if labels.size else np.empty(0, dtype=np.uint64)
        self.unique_keys = np.unique(self.keys)

    def count(self, eval_logits: np.ndarray, eval_labels: np.ndarray) -> int:
        """How many of these evaluation rows have exactly the logits and label of some validation row."""
        if not eval_labels.size or not self.labels.size:
            return 0
        keys = _probe_keys(eval_logits, eval_labels)
        candidates = np.isin(keys, self.unique_keys)
        if not candidates.any():
            return 0
        val_rows = np.isin(self.keys, keys[candidates])
        return int(np.count_nonzero(np.isin(content_hashes(eval_logits[candidates], eval_labels[candidates]),
                                            content_hashes(self.logits[val_rows], self.labels[val_rows]))))


def count_shared_rows(eval_logits: np.ndarray, eval_labels: np.ndarray, val: SharedRows) -> int:
    """How many evaluation rows have exactly the logits and label of some validation row."""
    return val.count(eval_logits, eval_labels)


def leak_warnings(test_path: str, val_path: str, n_shared: int) -> list[str]:
    """Warnings of a --val file that is the TEST file, or shares rows with its evaluation rows."""
    warnings = []
    try:
        same = os.path.samefile(test_path, val_path)
    except OSError:
        same = False
    if same:
        warnings.append(f"--val {val_path} is the TEST file itself")
    if n_shared:
        warnings.append(f"{n_shared} evaluation rows are also validation rows of {val_path} (same logits and "
                        "label): the fit has seen them; pass a --val file without the TEST rows")
    return warnings


def split_column_warnings(split: np.ndarray | None) -> list[str]:
    """A split column with no 'test' rows is read as absent (see :func:`split_plan`): say so, since
    its rows are then evaluated (and, without --val, held out at random) as if they were test rows."""
    if split is None or not split.size or (split == "test").any():
        return []
    return ["the split column has no 'test' rows (only 'val'): it was ignored, and its 'val' rows are "
            "evaluated as test rows; mark the evaluation rows 'test', or give them in another file"]


def split_warnings(n_eval: int, n_fit: int | None, n_ignored: int) -> list[str]:
    """Warnings about the sizes of the split (``n_fit``: validation rows fitted on, if any)."""
    warnings = []
    if n_eval < 100:
        warnings.append(f"only {n_eval} evaluation rows: every metric is noisy")
    if n_fit is not None and n_fit < 1000:
        warnings.append(f"only {n_fit} validation rows: T and p are fitted on little data")
    if n_ignored:
        warnings.append(f"{n_ignored} rows with the ignored label were dropped")
    return warnings


def _provenance(rule: str, options: Options, val_path: str | None, binary: bool, n_ignored: int,
                n_train: int = 0, by_id: bool = False) -> dict:
    """The model-level JSON keys that say where the numbers come from (beyond schema 1)."""
    extra: dict = {"val_path": val_path}
    if rule in ("holdout", "image-holdout"):
        extra.update(val_fraction=options.val_fraction, seed=options.seed)
    if rule == "holdout":
        extra["holdout_by"] = "id" if by_id else "position"
    if binary:
        extra["binary_logit"] = True
    if n_ignored:
        extra["n_ignored"] = n_ignored
    if n_train:
        extra["n_train_dropped"] = n_train
    return extra


def pixel_provenance(metadata: dict, names: np.ndarray, images: np.ndarray, val_images: np.ndarray | None,
                     eval_images: np.ndarray, val: Dump | None) -> dict:
    """The model-level ``pixels`` JSON key of pixel rows: the sampling settings and counts of
    the folder (``selcal.pixels`` metadata), and both parts of the split in images and pixels."""
    import json

    from .io.segmentation import PIXELS_METADATA

    try:
        out = dict(json.loads(metadata.get(PIXELS_METADATA, "{}")))
    except (ValueError, TypeError):
        out = {}
    out["eval_images"] = int(np.unique(eval_images).size)
    out["eval_pixels"] = int(eval_images.size)
    if val_images is not None:
        out["val_images"], out["val_pixels"] = int(np.unique(val_images).size), int(val_images.size)
    elif val is not None and getattr(val, "images", None) is not None:
        out["val_images"], out["val_pixels"] = int(np.unique(val.images).size), int(val.images.size)
    return out


def _ensemble_provenance(metadata: dict) -> dict:
    """The members of an ensemble dump (``selcal ensemble``), from its metadata, as JSON keys."""
    import json

    text = (metadata or {}).get("selcal.ensemble")
    if not text:
        return {}
    try:
        return {"ensemble": json.loads(text)}
    except ValueError:
        return {}


def evaluate_dump(test: Dump, val: Dump | None = None, *, options: Options = Options(), name: str | None = None,
                  progress: Callable[[int, int | None], None] | None = None) -> ModelResult:
    """Split, fit and measure one model's dump (see :func:`measure_arrays`)."""
    check_ids(test.path, test.ids, val.path if val is not None else None, val.ids if val is not None else None,
              test.split, val.split if val is not None else None)
    numbered = test.ids is None and options.errors_top
    if numbered:  # the confident errors name a row by its number in the file
        test = replace(test, ids=np.arange(len(test)))
    val_rows, eval_rows, rule = split_rows(test, val, options, by_position=numbered)
    n_train = test.n_train + (val.n_train if val is not None else 0)
    extra = _provenance(rule, options, val.path if val is not None else None, test.binary,
                        test.n_ignored + (val.n_ignored if val is not None else 0), n_train,
                        by_id=test.ids is not None and not numbered)
    extra.update(_ensemble_provenance(test.metadata))
    if test.images is not None:
        extra["pixels"] = pixel_provenance(test.metadata, test.image_names, test.images,
                                           None if val_rows is None or rule == "val-file" else val_rows.images,
                                           eval_rows.images, val)
    warnings = split_warnings(len(eval_rows), len(val_rows) if options.needs_validation and val_rows else None,
                              eval_rows.n_ignored) + split_column_warnings(test.split)
    result = measure_arrays(
        eval_rows.logits, eval_rows.labels,
        None if val_rows is None else val_rows.logits,
        None if val_rows is None else val_rows.labels,
        options=options, name=name or _model_name(test.path), path=test.path, split=rule,
        warnings=warnings,
        extra=extra, groups=eval_rows.groups,
        progress=progress, clusters=eval_rows.images, columns=eval_rows.columns,
        ids=eval_rows.ids,
        image_names=None if eval_rows.images is None or test.image_names is None else test.image_names,
    )
    if val is not None:  # after the fit's own warnings, as in evaluate_source
        shared = count_shared_rows(eval_rows.logits, eval_rows.labels, SharedRows(val_rows.logits, val_rows.labels))
        result.warnings += leak_warnings(test.path, val.path, shared)
    result.cluster_names = test.image_names
    return result


# ------------------------------------------------------------------------ streaming
def _release_freed_memory() -> None:
    """Hand memory freed by finished chunks back to the OS (glibc keeps it otherwise).

    Without this, glibc's heap keeps the freed chunk buffers, and a long streamed run's
    resident memory creeps up with the number of chunks even though nothing is live.
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc: nothing to do
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def _stream_chunks(source: DumpSource, eval_mask: np.ndarray | None, rows: int, groups_out: list | None,
                   val_rows: SharedRows | None = None, shared: list | None = None):
    """Evaluation rows of a streamed dump as (logits, labels) chunks of at most ``rows`` rows.

    With ``val_rows``, the evaluation rows that are also validation rows are counted into ``shared[0]``.
    """
    offset = 0
    for index, batch in enumerate(source.batches(rows)):
        if index % 8 == 7:
            _release_freed_memory()
        logits, labels, groups = batch.logits, batch.labels, batch.groups
        if eval_mask is not None:
            keep = eval_mask[offset:offset + labels.size]
            logits, labels = logits[keep], labels[keep]
            groups = None if groups is None else groups[keep]
        offset += batch.labels.size
        if groups_out is not None and groups is not None:
            groups_out.append(groups)
        if labels.size:
            logits = expand_binary(logits) if logits.shape[1] == 1 else logits
            if val_rows is not None:
                shared[0] += count_shared_rows(logits, labels, val_rows)
            yield logits, labels


def _gather(source: DumpSource, mask: np.ndarray) -> Dump:
    """The rows of a streamed dump selected by ``mask``, in memory (e.g. its validation rows)."""
    n_rows = int(mask.sum())
    logits, labels = None, np.empty(n_rows, dtype=np.int64)
    offset = filled = 0
    for batch in source.batches():
        keep = mask[offset:offset + batch.labels.size]
        offset += batch.labels.size
        if logits is None:
            logits = np.empty((n_rows, batch.logits.shape[1]), dtype=batch.logits.dtype)
        taken = int(keep.sum())
        logits[filled:filled + taken] = batch.logits[keep]
        labels[filled:filled + taken] = batch.labels[keep]
        filled += taken
    binary = logits.shape[1] == 1
    return Dump(path=source.path, logits=expand_binary(logits) if binary else logits, labels=labels, binary=binary)


def read_columns(source: DumpSource, options: Options) -> dict[str, np.ndarray]:
    """The values of ``options.score_cols`` and ``options.uncertainty_cols`` for every kept row of the file."""
    return {name: source.value_column(name) for name in options.score_cols + options.uncertainty_cols}


# Model-level numbers that need the logits (reported as not available for a file without them).
_NEED_LOGITS = ("nll", "brier", "cece", "top5_accuracy")


def evaluate_confidences(source: DumpSource, val: DumpSource | None = None, *, options: Options = Options(),
                         name: str | None = None) -> ModelResult:
    """A file with no logits, only a confidence, a prediction and a label per row
    (:class:`selcal.io.confidence.ConfidenceSource`).

    The scores are its columns: ``options.score_cols`` and ``options.uncertainty_cols``, or by
    default the column ``confidence``. Every selective metric is computed, and ECE, adaptive
    ECE and MCE for a confidence in [0, 1] (the top-label calibration). The scores and the
    numbers that need logits (``options.scores``, NLL, Brier, class-wise ECE, top-5) are
    listed under ``not_available``. With a split column, the 'test' rows are evaluated.
    """
    from .io.confidence import CONFIDENCE_NAME

    if val is not None:
        raise SelcalError(f"{source.path}: holds no logits, so nothing is fitted on a --val file; leave out --val")
    rule, _, eval_mask = split_plan(source.split_column(), False, False, lambda: None)
    labels, predictions = source.labels, source.predictions
    if eval_mask is not None:
        labels, predictions = labels[eval_mask], predictions[eval_mask]
    if labels.size == 0:
        raise SelcalError(f"{source.path}: has no evaluation rows")
    given = options.score_cols or options.uncertainty_cols
    if not given and CONFIDENCE_NAME not in source._names:
        raise SelcalError(f"{source.path}: no column '{CONFIDENCE_NAME}' (columns: {', '.join(source._names)}); "
                          "name the confidence with --score-col or the uncertainty with --uncertainty-col")
    column_options = options if given else replace(options, score_cols=(CONFIDENCE_NAME,))
    columns = {column: values if eval_mask is None else values[eval_mask]
               for column, values in read_columns(source, column_options).items()}
    correct = predictions == labels
    n = int(correct.size)
    rows = RowReduction(correct=correct, log_msp=None, max_logit=None, nll=None, brier=None,
                        looks_like_probabilities=None, label_is_pred_plus_one=None, classwise=None)
    n_ignored = source.num_rows - source.num_kept_rows
    extra = {"val_path": None, "logits": False,
             "not_available": {"scores": list(options.scores), "metrics": list(_NEED_LOGITS)}}
    if n_ignored:
        extra["n_ignored"] = n_ignored
    result = ModelResult(
        name=name or _model_name(source.path), path=source.path, num_classes=None, n_eval=n, n_val=0, split=rule,
        accuracy=float(np.count_nonzero(correct) / n), error=float(np.count_nonzero(~correct) / n),
        nll=None, brier=None, cece=None, warnings=split_warnings(n, None, n_ignored), extra=extra, rows=rows,
    )
    _add_column_scores(result, columns, column_options)
    return result


def evaluate_source(test: DumpSource, val: DumpSource | None = None, *, options: Options = Options(),
                    name: str | None = None, progress: Callable[[int, int | None], None] | None = None) -> ModelResult:
    """:func:`evaluate_dump` for a dump streamed by row batches: memory bounded by the
    validation rows, whatever the size of the evaluation rows.

    The split rules are those of :func:`split_rows` (a hold-out is chosen by the same row
    hashes), and the per-row numbers are the same, so the result is bit-for-bit that of
    the in-memory path.
    """
    if test.num_rows == 0:
        raise SelcalError(f"{test.path}: has no rows")
    if test.num_kept_rows == 0:
        raise SelcalError(f"{test.path}: column '{test.label_col}': {nothing_left_message(test)}")
    check_ids(test.path, test.id_column(), val.path if val is not None else None,
              val.id_column() if val is not None else None, test.split_column(),
              val.split_column() if val is not None else None)
    images = test.image_column()

    def holdout() -> np.ndarray:
        if images is not None:
            return image_holdout_mask(images[0], images[1], options.val_fraction, options.seed, where=test.path)
        return holdout_mask(test.num_kept_rows, test.id_column(), options.val_fraction, options.seed, test.path)

    rule, val_mask, eval_mask = split_plan(test.split_column(), val is not None, options.needs_validation, holdout)
    rule = _rule_name(rule, images is not None, test.metadata)
    if val is not None:
        val_rows = _rows_of(val.read_all(), "val")
        _check_same_classes(test.path, test.num_classes, val.path, val.num_classes)
    elif val_mask is not None and options.needs_validation:
        val_rows = _gather(test, val_mask)  # read only when something is fitted on them
    else:
        val_rows = None
    n_val = len(val_rows) if val_rows is not None else 0 if val_mask is None else int(val_mask.sum())
    n_train = test.num_train_rows + (val.num_train_rows if val is not None else 0)
    n_ignored = (test.num_rows - test.num_kept_rows - test.num_train_rows
                 + (val.num_rows - val.num_kept_rows - val.num_train_rows if val is not None else 0))
    n_eval = test.num_kept_rows if eval_mask is None else int(eval_mask.sum())
    warnings = split_warnings(n_eval, len(val_rows) if options.needs_validation and val_rows else None,
                              test.num_rows - test.num_kept_rows - test.num_train_rows) + \
        split_column_warnings(test.split_column())
    states = fit_scores(None if val_rows is None else val_rows.logits,
                        None if val_rows is None else val_rows.labels, options, where=test.path, warnings=warnings)
    extra = _provenance(rule, options, val.path if val is not None else None, test.num_classes == 1, n_ignored,
                        n_train, by_id=rule == "holdout" and test.id_column() is not None)
    extra.update(_ensemble_provenance(test.metadata))
    eval_images = None
    if images is not None:
        eval_images = images[0] if eval_mask is None else images[0][eval_mask]
        val_images = images[0][val_mask] if val_mask is not None and rule != "val-file" else None
        extra["pixels"] = pixel_provenance(test.metadata, images[1], images[0], val_images, eval_images,
                                           val_rows if val is not None else None)
    n_classes = max(test.num_classes, 2)
    groups: list | None = [] if getattr(test, "group_col", None) else None
    shared = [0]
    shared_index = None if val is None else SharedRows(val_rows.logits, val_rows.labels)
    chunks = _stream_chunks(test, eval_mask, rows_per_chunk(n_classes, options), groups, shared_index, shared)
    result = _measure(chunks, n_classes, states, options=options,
                      name=name or _model_name(test.path),
                      path=test.path, split=rule, n_val=n_val,
                      warnings=warnings, extra=extra, groups=None, progress=progress, total=n_eval,
                      columns={column: values if eval_mask is None else values[eval_mask]
                               for column, values in read_columns(test, options).items()},
                      ids_of=_stream_ids(test, eval_mask))
    if val is not None:
        result.warnings += [w for w in leak_warnings(test.path, val.path, shared[0]) if w not in result.warnings]
    if groups:
        result.groups = np.concatenate(groups)
        result.extra["groups"] = _group_metrics(result, options)
    result.clusters = eval_images
    result.cluster_names = None if images is None else images[1]
    return result


def _stream_ids(source: DumpSource, eval_mask: np.ndarray | None):
    """ids_of(evaluation positions) for a streamed dump: its ids, or row numbers (read when asked)."""
    def ids_of(positions: np.ndarray) -> np.ndarray:
        kept = positions if eval_mask is None else np.flatnonzero(eval_mask)[positions]
        ids = source.id_column()
        return kept if ids is None else ids[kept]
    return ids_of


_GENERIC_STEMS = {"test", "val", "valid", "validation", "logits", "eval", "dump", "output", "outputs"}


def _model_name(path: str) -> str:
    """The file's stem; with its folder when the stem says nothing (``resnet50/test``)."""
    # A backslash separates folders only where it is the separator (Windows); on POSIX it is a
    # character of the name (``$x_y^z\\.parquet``).
    if lmeval.is_log(path):
        return lmeval.model_name(path)
    if fdshifts.is_fdshifts(path):
        return fdshifts.model_name(path)
    parts = (path.replace(os.sep, "/") if os.sep != "/" else path).rstrip("/").split("/")
    # a glob of parts (not a file whose name holds '[' or '*'): the model is their folder
    if len(parts) > 1 and set("*?[") & set(parts[-1]) and not os.path.exists(path):
        parts = parts[:-1]
    stem = parts[-1]
    for suffix in (".parquet", ".npz", ".pq", ".npy", ".pt", ".pth", *TEXT_SUFFIXES):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem.lower() in _GENERIC_STEMS and len(parts) > 1 and parts[-2] not in ("", "."):
        return f"{parts[-2]}/{stem}"
    return stem


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
    test = open_dump(job.path, group_col=job.group_col, **job.columns)
    if progress is not None and hasattr(test, "progress"):  # a reader that reports its reading (images)
        test.progress = progress
    val_source = open_dump(job.val, **job.columns) if job.val is not None else None
    streamed = job.stream if job.stream is not None else test.logits_bytes > job.memory_budget
    if getattr(test, "confidence_only", False):
        return evaluate_confidences(test, val_source, options=job.options, name=job.name)
    if streamed:
        return evaluate_source(test, val_source, options=job.options, name=job.name, progress=progress)
    dump = test.read_all()
    dump.columns = read_columns(test, job.options)
    return evaluate_dump(dump, val_source.read_all() if val_source else None,
                         options=job.options, name=job.name, progress=progress)


def _streamed_job(job: ModelJob) -> ModelResult:
    """A model evaluated on a remote worker: always streamed, so its memory stays bounded."""
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
        raise SelcalError(f"got {len(paths)} TEST files but {len(vals)} --val files; give one --val per file, in the same order")
    columns = dict(label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                   pixels_per_image=pixels_per_image, seed=options.seed, **(reader_settings or {}))
    expanded = [(i, *model) for i, path in enumerate(paths) for model in expand_input(path)]
    if vals and len(expanded) != len(paths):
        raise SelcalError("--val cannot be given with a folder of lm-evaluation-harness logs or a log of several "
                          "choice counts; their models are fitted on a hold-out of their own rows")
    names = _unique_names([path for _, path, _, _ in expanded], [name for _, _, _, name in expanded])
    return [ModelJob(path, str(vals[i]) if vals else None, names[j], options, {**columns, **settings}, group_col,
                     stream, memory_budget) for j, (i, path, settings, _) in enumerate(expanded)]


def run_jobs(jobs: Sequence[ModelJob], *, engine: str = "local",
             progress: Callable[[int, int | None], None] | None = None,
             models_progress: Callable[[int, int], None] | None = None) -> tuple[EvaluationResult, list]:
    """Evaluate every job on ``engine``: (the result of the models that succeeded, the failures).

    A model that fails does not stop the others; each failure is an
    :class:`selcal.engines.Failure` whose ``index`` is the job's. The local engine reports
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


def evaluate(
    paths,
    val=None,
    *,
    options: Options | None = None,
    label_col: str | None = None,
    logits_col: str | None = None,
    ignore_label: int | None = None,
    group_col: str | None = None,
    pixels_per_image: int | None = None,
    input_kind: str | None = None,
    lm_norm: str | None = None,
    stream: bool | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    progress: Callable[[int, int | None], None] | None = None,
    engine: str = "local",
    bootstrap: int = 0,
    bootstrap_refit: bool = False,
    confidence: float = 0.95,
    sweep: str | None = None,
    **option_values,
) -> EvaluationResult:
    """Evaluate one or several dumps; the Python API behind ``selcal evaluate``.

    Parameters
    ----------
    paths : path or list of paths to TEST dumps (Parquet, .npz, a folder or glob of
        Parquet parts), one model each.
    val : path or list of paths, one validation dump per TEST file (optional).
    options : :class:`Options`; or give its fields as keyword arguments.
    pixels_per_image : pixels drawn per image of a segmentation folder (default 5000; 0: every
        labelled pixel); the draw is seeded by ``options.seed``.
    input_kind : ``--input``: ``logits``, ``probs`` or ``logprobs`` (default: probabilities are
        detected, :mod:`selcal.io.probs`).
    lm_norm : ``--lm-norm``: lm-evaluation-harness logs' length normalisation, ``none``,
        ``chars`` (lm-eval's ``acc_norm``) or ``bytes`` (``acc_bytes``).
    stream : read the TEST file by row batches instead of whole. By default a file is
        streamed when its logits take more than ``memory_budget`` bytes. Either way
        the numbers are the same, bit for bit.
    engine : ``local`` (this process) or ``ray`` (one Ray task per model; needs the
        ``ray`` extra). The numbers are the same, bit for bit.
    bootstrap, bootstrap_refit, confidence : ``--bootstrap B``, ``--bootstrap-refit`` and
        ``--confidence``: percentile intervals from B resamples (0: none), as the CLI adds them.
    **option_values : the fields of :class:`Options` (``scores="msp,temp"``, ``bins=20``,
        ``p_grid="1-10"``, ``seed=1``, ...), checked as the CLI checks its flags.
    sweep : the name of a hyperparameter that differs between the models (``--sweep``): each
        model's value, from the Parquet metadata key of that name or else from the file
        name (:func:`selcal.diagnostics.sweep_value`), goes into ``extra["sweep"]``.

    Raises the error of the first model that fails.

    Examples
    --------
    >>> result = evaluate("sample_logits/calibrator_cifar10_resnet50_ce.parquet")
    >>> round(result.models[0].scores["msp"]["aurc"], 6)
    0.009505
    """
    options = resolve_options(options, option_values, "evaluate")
    if bootstrap:
        from .bootstrap import check_arguments

        check_arguments(bootstrap, confidence)
    swept = None if sweep is None else sweep_values(paths, sweep)  # refused before any work
    jobs = model_jobs(paths, val, options=options, label_col=label_col, logits_col=logits_col,
                      ignore_label=ignore_label, group_col=group_col, stream=stream, memory_budget=memory_budget,
                      pixels_per_image=pixels_per_image, reader_settings={"input_kind": input_kind, "lm_norm": lm_norm})
    result, failures = run_jobs(jobs, engine=engine, progress=progress)
    if failures:
        raise SelcalError(failures[0].message)
    if swept is not None:
        add_sweep(result, sweep, swept)
    if bootstrap:
        result = with_intervals(result, resamples=bootstrap, confidence=confidence, refit=bootstrap_refit,
                                paths=paths, val=val, label_col=label_col, logits_col=logits_col,
                                ignore_label=ignore_label, pixels_per_image=pixels_per_image)
    return result


def resolve_options(options: Options | None, option_values: dict, caller: str) -> Options:
    """``options`` with the keyword arguments ``option_values`` (fields of :class:`Options`) applied."""
    options = options or Options()
    if not option_values:
        return options
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(option_values) - known)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}; "
                        f"the options are {', '.join(sorted(known))}")
    return replace(options, **option_values)


def with_intervals(result: EvaluationResult, *, resamples: int, confidence: float, refit: bool, paths=None, val=None,
                   refit_data=None, progress=None, **read) -> EvaluationResult:
    """``--bootstrap``: intervals for every model of ``result``; with ``refit``, T and p refitted
    on every resample (the dumps at ``paths``/``val`` are read again, or ``refit_data`` is given)."""
    from .bootstrap import add_intervals

    if refit and refit_data is None:
        from .checks import refit_data as read_refit_data

        paths = [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else list(paths)
        vals = None if val is None else ([val] if isinstance(val, (str, bytes)) or hasattr(val, "__fspath__")
                                         else list(val))
        refit_data = read_refit_data([str(p) for p in paths], None if vals is None else [str(v) for v in vals],
                                     result.options, **read)
    return add_intervals(result, resamples=resamples, seed=result.options.seed, confidence=confidence,
                         refit=refit_data if refit else None, progress=progress)


def evaluate_arrays(
    logits,
    labels,
    val_logits=None,
    val_labels=None,
    *,
    options: Options | None = None,
    name: str = "model",
    groups=None,
    ignore_label: int | None = None,
    ids=None,
    bootstrap: int = 0,
    bootstrap_refit: bool = False,
    confidence: float = 0.95,
    progress: Callable[[int, int | None], None] | None = None,
    path: str = "",
    split: str | None = None,
    warnings: Sequence[str] = (),
    extra: dict | None = None,
    clusters=None,
    **option_values,
) -> EvaluationResult:
    """Evaluate one model from arrays you already hold; :func:`evaluate` for arrays.

    The conventions are those of a file given to ``selcal evaluate``: with ``val_logits``
    and ``val_labels`` the scores are fitted on them (as with ``--val``); without, and when
    a fitted score is asked for, on a seeded random hold-out of the rows (``val_fraction``,
    ``seed``); one binary logit per row (a 1-D array, or K = 1) means logits (0, v).

    Parameters
    ----------
    logits, val_logits : (N, K) or (N,) numbers: numpy arrays, lists, torch tensors (any
        device, ``requires_grad``, float16 or bfloat16), pandas or polars objects (a
        DataFrame of logits columns).
    labels, val_labels : (N,) integers 0 .. K-1 (bool and whole floats are read as integers).
    options : :class:`Options`; or give its fields as keyword arguments, e.g.
        ``scores="msp,temp"``, ``bins=20``, ``risks=[0.01]``, ``p_grid="1-10"``, ``seed=1``.
    name : the model's name in the result.
    groups : (N,) a group per row (e.g. the source data set): per-group metrics, as ``--group-col``.
    ignore_label : rows with this label are dropped and counted (as ``--ignore-label``).
    ids : (N,) a name per row (as an ``id`` column): the most-confident-errors table
        (``confident_errors``) names rows by it; by default by their index.
    bootstrap, bootstrap_refit, confidence : as ``--bootstrap``, ``--bootstrap-refit``, ``--confidence``.
    path, split, warnings, extra, clusters : what the result says of where the rows come from
        (the split rule's name, warnings and JSON keys to add, the image of each row).

    Returns
    -------
    :class:`~selcal.report.EvaluationResult` of one model (``.models``, ``.to_json()``; it also
    answers for its model: ``result.scores`` is ``result.models[0].scores``).

    Errors name the Python arguments (``logits: row 3 holds NaN for class 0; ...``,
    ``bins must be at least 1, got 0``).

    Examples
    --------
    >>> result = evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], [0, 1, 1], scores="msp,max_logit")
    >>> result.models[0].accuracy, result.models[0].n_eval
    (0.6666666666666666, 3)
    """
    from .arrays import array_dump, to_numpy

    options = resolve_options(options, option_values, "evaluate_arrays")
    if bootstrap:
        from .bootstrap import check_arguments

        check_arguments(bootstrap, confidence)
    if (val_logits is None) != (val_labels is None):
        raise SelcalError("val_logits and val_labels go together: pass both or neither")
    test = array_dump(logits, labels, ("logits", "labels"), ignore_label=ignore_label, groups=groups, ids=ids)
    val = None if val_logits is None else array_dump(val_logits, val_labels, ("val_logits", "val_labels"),
                                                     ignore_label=ignore_label)
    model = evaluate_dump(test, val, options=options, name=name, progress=progress)
    model.path = path
    if val is not None:
        model.extra["val_path"] = None
    if split is not None:
        model.split = split
    model.warnings[:0] = list(warnings)
    model.extra.update(extra or {})
    if clusters is not None:
        model.clusters = np.asarray(to_numpy(clusters, "clusters")).ravel()
    result = EvaluationResult(models=[model], options=options)
    if bootstrap:
        refit_data = None
        if bootstrap_refit:
            from .bootstrap import RefitData

            fit, rows, _ = split_rows(test, val, options)
            refit_data = [None if fit is None else RefitData(rows.logits, rows.labels, fit.logits, fit.labels)]
        result = with_intervals(result, resamples=bootstrap, confidence=confidence, refit=bootstrap_refit,
                                refit_data=refit_data)
    return result


def sweep_values(paths, name: str) -> list[float]:
    """Each TEST file's value of the swept hyperparameter ``name`` (``--sweep NAME``): its
    Parquet metadata key ``name``, else its file name (:func:`selcal.diagnostics.sweep_value`)."""
    paths = [paths] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") else list(paths)
    return [diagnostics.sweep_value(str(path), name, parquet_schema_metadata(path)) for path in paths]


def add_sweep(result: EvaluationResult, name: str, values: Sequence[float]) -> None:
    """Set ``extra["sweep"] = {name: value}`` on each model (in the order of the TEST files)."""
    for model, value in zip(result.models, values):
        model.extra["sweep"] = {name: value}


def _unique_names(paths: list[str], given: list | None = None) -> list[str]:
    names = [name or _model_name(p) for p, name in zip(paths, given or [None] * len(paths))]
    if len(set(names)) == len(names):
        return names
    return [p if name is None or name == _model_name(p) else f"{p} ({name})" for p, name in zip(paths, given or names)]
