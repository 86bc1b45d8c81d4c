"""One pass over the evaluation logits, chunk by chunk, to a few float64 numbers per row and score
(:class:`RowReduction`): every chosen score of the registry reads the chunk's shared softmax terms.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
import os

import numpy as np

from ..metrics import calibration, diagnostics
from .. import scores
from ..errors import SelcalError, carried
from ..metrics.exact_sums import single_threaded_blas
from ..options import Options
from ..scores import REGISTRY
from ..scores import validate
from ..scores.functions import ChunkTerms
from .split import row_hashes

__all__ = ["RowReduction", "ScoreRows", "TOP_K", "array_chunks", "in_top_k", "reduce_rows", "rows_per_chunk"]


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
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # a score entry's extra_rows (figures), by its keys
    pred: np.ndarray | None = None  # argmax (int32), for the confident-errors table
    label: np.ndarray | None = None  # label (int32)
    profile: np.ndarray | None = None  # (n_sample, R) largest logits, highest first, of sampled rows
    profile_correct: np.ndarray | None = None
    ood: np.ndarray | None = None  # the row belongs to no class (--ood-label): an error, with no NLL or Brier


def probability_terms(logits, labels, inverse_temperature, n_bins, pred=None, terms=None, wanted=("nll", "brier", "cece"),
                      shifted=None):
    """log-MSP, NLL, Brier per row and class-wise bins for softmax(beta v) (those not ``wanted``: None).
    ``terms``: the softmax terms, when made (modified here); ``shifted``: v - v_max, when made (read only).

    Brier is sum_k (p_k - [y = k])^2 written with S = sum_{k != pred} exp(beta (v_k - v_max))
    so that no term cancels when p_y is close to 1.
    """
    pred, exps, rest = terms if terms is not None else scores.softmax_terms(logits, inverse_temperature, pred, shifted)
    if not wanted:
        return pred, -np.log1p(rest), None, None, None
    ood = labels < 0  # rows of no class (--ood-label): no NLL, Brier or class-wise bin
    if ood.any():
        labels = np.where(ood, pred, labels)
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
    scaled = exps  # p * CLASSWISE_SCALE, divided straight from the exponentials (both exact powers of two)
    scaled /= (denominator / calibration.CLASSWISE_SCALE)[:, None]
    scaled[rows, pred] = calibration.CLASSWISE_SCALE / denominator
    if ood.any():
        nll[ood] = brier[ood] = np.nan
        scaled, labels = scaled[~ood], labels[~ood]
    bins = calibration.scaled_classwise_update(scaled, labels, n_bins)
    return pred, -np.log1p(rest), nll, brier, bins


TOP_K = 5


def in_top_k(logits: np.ndarray, labels: np.ndarray, k: int = TOP_K, pred: np.ndarray | None = None) -> np.ndarray:
    """Whether each row's label is among its ``k`` largest logits, ties broken toward the
    lower class index as argmax breaks them.

    The label's rank (from 0) is the number of logits strictly above v_y plus the number
    equal to v_y at a lower class index; the row counts when that rank is below ``k``.
    One comparison per logit decides the rows with fewer than ``k`` other logits >= v_y;
    the others (few, for a useful model) are compared again, and their equal logits looked
    at only where they can decide it. ``pred``, the argmax when known: its rows (label = argmax,
    rank 0) are not compared at all.

    Examples
    --------
    >>> logits = np.array([[1.0, 3.0, 3.0, 0.0], [1.0, 3.0, 3.0, 0.0]])
    >>> in_top_k(logits, np.array([1, 2]), k=1).tolist()
    [True, False]
    """
    if pred is not None:
        inside = pred == labels
        wrong = np.flatnonzero(~inside)
        inside[wrong] = in_top_k(logits[wrong], labels[wrong], k)
        return inside
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
    ood = labels < 0  # rows of no class (--ood-label): no NLL, Brier or class-wise bin
    labels = np.where(ood, pred, labels)
    if "nll" in wanted:
        with np.errstate(divide="ignore"):
            nll = -np.log(probabilities[rows, labels])
    if "brier" in wanted:
        off = probabilities.copy()
        off[rows, labels] -= 1.0
        brier = np.einsum("ij,ij->i", off, off)
    for values in (nll, brier):
        if values is not None:
            values[ood] = np.nan
    if "cece" in wanted:
        bins = calibration.classwise_update(np.clip(probabilities[~ood], 0.0, 1.0), labels[~ood], n_bins)
    return pred, top, nll, brier, bins


def _score_chunk(entry, terms: ChunkTerms, labels: np.ndarray, state, options: Options, out: dict) -> None:
    """The per-row numbers of one score on a chunk, into ``out`` (keys ``field:name``)."""
    name = entry.name
    if entry.score is not None:
        out[f"values:{name}"] = validate.score_values(entry, terms, state)
    if entry.extra_rows is not None:
        out.update({f"extra:{key}": values for key, values in entry.extra_rows(terms, state, options).items()})
    if entry.probabilities is not None:
        pred, top, nll, brier, bins = _probabilities_terms(validate.probabilities(entry, terms, state), labels,
                                                           options.bins, entry.reports)
        out[f"confidence:{name}"] = top
        out.setdefault(f"values:{name}", top)
        if entry.own_predictions:
            out[f"correct:{name}"], out[f"pred:{name}"] = pred == labels, pred.astype(np.int32)
    elif entry.softmax is not None:
        z, beta, pred = entry.softmax(terms, state)
        if z is terms.logits and beta == 1.0:  # the model's own softmax: its numbers are the model's
            out[f"base:{name}"] = True
            return
        pred, log_top, nll, brier, bins = probability_terms(z, labels, beta, options.bins, pred, wanted=entry.reports,
                                                            shifted=terms.shifted if z is terms.logits else None)
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
    pred, log_msp, nll, brier, bins = probability_terms(chunk, labels, 1.0, options.bins, terms=terms.softmax)
    for name in options.scores:
        if out.pop(f"base:{name}", False):
            out[f"log_confidence:{name}"] = out.setdefault(f"values:{name}", log_msp)
            wanted = REGISTRY[name].reports
            for key, value in (("nll", nll), ("brier", brier), ("cece", bins)):
                if key in wanted:
                    out[f"{'classwise' if key == 'cece' else key}:{name}"] = value
    out.update({"correct": pred == labels, "log_msp": log_msp, "max_logit": terms.top,
                "nll": nll, "brier": brier, "looks_like_probabilities": _looks_like_probabilities(chunk),
                "label_is_pred_plus_one": pred + 1 == labels, "classwise": bins, "ood": labels < 0})
    if options.errors_top:
        out["pred"], out["label"] = pred.astype(np.int32), labels.astype(np.int32)
    if options.logit_profile:
        # a hash seeded apart from the hold-out's, whose lowest hashes are the validation rows
        keep = slice(None) if sample_below is None else row_hashes(chunk, labels, options.seed + 1) < sample_below
        out["profile"] = (diagnostics.top_sorted_logits(chunk[keep]), out["correct"][keep])
    if chunk.shape[1] >= TOP_K:
        out["top5"] = in_top_k(chunk, np.maximum(labels, 0), pred=pred) & (labels >= 0)  # a row of no class is never right
    return out


def _looks_like_probabilities(chunk: np.ndarray) -> np.ndarray:
    """Rows that are non-negative and sum to 1 within 1e-3; the sums are taken only of the
    non-negative rows (few, for logits)."""
    looks = chunk.min(axis=1) >= 0
    rows = np.flatnonzero(looks)
    if rows.size:
        looks[rows] = np.abs(chunk[rows].sum(axis=1) - 1) < 1e-3
    return looks


def rows_per_chunk(n_classes: int, options: Options) -> int:
    return options.chunk_rows or max(1, min(1 << 20, scores.CHUNK_ELEMENTS // n_classes))


def cache_blocks(chunks: Iterable[tuple[np.ndarray, np.ndarray]], n_classes: int, options: Options):
    """Each (logits, labels) chunk as blocks of about ``scores.CACHE_ELEMENTS`` logits, the size whose
    float64 temporaries stay in a core's cache (``options.chunk_rows``, when set, is kept as it is)."""
    if options.chunk_rows:
        yield from chunks
        return
    rows = max(1, scores.CACHE_ELEMENTS // max(n_classes, 1))
    for logits, labels in chunks:
        if len(labels) <= rows:
            yield logits, labels
        else:
            for start in range(0, len(labels), rows):
                yield logits[start:start + rows], labels[start:start + rows]


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
    on ``options.workers`` threads (numpy releases the GIL) in cache-sized blocks
    (:func:`cache_blocks`), with at most a few blocks in flight, so memory stays bounded for a
    streamed file. ``progress(rows_done, total)`` is
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
    chunks = cache_blocks(chunks, n_classes, options)
    with single_threaded_blas():  # a score applied through BLAS (dirichlet's W log p): the same bits anywhere
        if workers <= 1:
            for chunk, labels in chunks:
                collect(_reduce_chunk(chunk, labels, options, states, sample_below), len(labels))
        else:
            # A read batch's worth of blocks per worker, and one more, in flight: the workers keep busy
            # while the next batch is read (blocks are views of the batches: 2 MB each in float32).
            in_flight = (workers + 1) * max(1, scores.CHUNK_ELEMENTS // scores.CACHE_ELEMENTS)
            reduce_chunk = carried(_reduce_chunk)  # (a thread's messages in the caller's face)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                pending: deque = deque()
                for chunk, labels in chunks:
                    pending.append((pool.submit(reduce_chunk, chunk, labels, options, states, sample_below),
                                    len(labels)))
                    if len(pending) > in_flight:
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
