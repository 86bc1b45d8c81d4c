"""``selcal threshold`` as a library: the certified deployment threshold of one model's dump.

Read the dumps, split the rows by evaluate's rule (``--val``, a split column, or the seeded
hold-out), score them, certify a threshold on the calibration rows
(:mod:`selcal.threshold.guarantee`) and measure it on the evaluation rows. For a score fitted on
validation rows, a seeded half of the validation rows fits it and the other half calibrates,
so the calibration rows are new to the fitted score (CONVENTIONS.md, "Deployment thresholds
with a guarantee").

The only function that knows how a score is computed is :func:`score_chunks`; everything else
reads its result. A TEST file whose logits exceed the memory budget is streamed
(:func:`threshold_source`): the same numbers, in memory bounded by the chunks, the rows that fit
a fitted score and a few numbers per row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain

import numpy as np

from ..api import resolve_options
from ..errors import OptionError, SelcalError, said
from ..metrics.selective import RiskCoverage, risk_coverage
from ..options import Options, fraction, split_items
from ..pipeline.identity import identity_hashes
from ..pipeline.measure import INPUT_WORDS
from ..pipeline.reduce import array_chunks, rows_per_chunk
from ..pipeline.split import (
    SharedRows,
    count_shared_rows,
    image_holdout_mask,
    leak_warnings,
    lowest_hashes,
    model_name_of,
    split_rows,
)
from ..scores import REGISTRY
from .groups import GroupCertificate, certify_groups, combined, group_delta
from .guarantee import (
    DEFAULT_DELTA,
    DEFAULT_METHOD,
    DEFAULT_RISK,
    METHODS,
    Applied,
    Certificate,
    apply_threshold,
    certify,
    check_delta,
    check_level,
    minimum_rows,
    rounds_to_a_bound,
)
from .precision import DEFAULT_DTYPE, DTYPES, ChunkWatcher

# The halves of the validation rows (fit / calibrate) of a fitted score: the smallest hashes of the
# rows' identity under this purpose (unrelated to the hold-out's hashes of the same seed) fit.
FIT_HALF_PURPOSE = "threshold.fit"

__all__ = ["ThresholdEntry", "ThresholdResult", "threshold", "threshold_dump", "score_rows", "parse_risks"]


def parse_risks(value) -> tuple[float, ...]:
    """Risk targets from a float, a sequence or comma-separated text, each in (0, 1).

    Examples
    --------
    >>> parse_risks("0.01, 0.05"), parse_risks(0.1)
    ((0.01, 0.05), (0.1,))
    """
    if isinstance(value, str):
        items = split_items(value, "risk")
    elif isinstance(value, (int, float)):
        items = [value]
    else:
        items = list(value)
    if not items:
        raise OptionError("risk", "{option} needs at least one target, e.g. 0.05")
    out = []
    for item in items:
        try:
            out.append(check_level(fraction(item), "risk"))
        except ValueError:
            number = _as_float(item)
            rounded = f" (it rounds to {number:g} in float64)" if rounds_to_a_bound(item, number) else ""
            raise OptionError("risk", "{option} takes targets in (0, 1), e.g. 0.05 or 0.01,0.05 (or 5%, 1%,5%); got "
                              + repr(item if isinstance(item, str) else number) + rounded) from None
    return tuple(dict.fromkeys(out))


def _as_float(value) -> float | None:
    try:
        return fraction(value)
    except (TypeError, ValueError):
        return None


def _check_delta(delta) -> float:
    try:
        return check_delta(fraction(delta))
    except ValueError as exc:
        if _as_float(delta) is not None and 0 < _as_float(delta) < 1:  # below the floor: the reason is the message's
            raise OptionError("delta", "{option}" + str(exc).removeprefix("delta")) from None
        rounded = f" (it rounds to {_as_float(delta):g} in float64)" if rounds_to_a_bound(delta, _as_float(delta)) else ""
        raise OptionError("delta", "{option} must be in (0, 1), e.g. 0.1 or 10% for 90% confidence; got "
                          + repr(delta) + rounded) from None


def _check_method(method) -> str:
    if method not in METHODS:
        raise OptionError("method", "{option} must be " + " or ".join(METHODS) + f"; got {method!r}")
    return method


def _check_dtype(dtype, score: str | None = None) -> str:
    """``dtype`` (float64 or float32), refused in one line when unknown or, for float32, when the
    score is not a softmax (its float32 computation is not defined)."""
    if dtype not in DTYPES:
        raise OptionError("dtype", "{option} must be " + " or ".join(DTYPES) + f"; got {dtype!r}")
    if dtype == "float32" and score is not None and REGISTRY[score].softmax is None:
        softmaxes = ", ".join(name for name, entry in REGISTRY.items() if entry.softmax is not None)
        raise OptionError("dtype", f"{{option}} float32 computes a softmax in float32, and {score} is not a "
                                   f"softmax; choose a softmax score ({softmaxes}) or leave out {{option}}")
    return dtype


PER_CLASS = "predicted class"  # what --per-class groups by (the name the outputs give the grouping)
STORED = "stored"  # the precision of a file of confidences: its column, as stored


@dataclass(frozen=True)
class Request:
    """What is asked, checked once: the risk targets, δ, the method, the precision of the
    confidences (``float64``, ``float32``, or ``stored`` for a file of confidences), and the
    grouping (``group_by``: a column, :data:`PER_CLASS`, or None; ``per_group``: each group at δ
    instead of δ / G)."""

    risks: tuple[float, ...]
    delta: float
    method: str
    dtype: str = DEFAULT_DTYPE
    group_by: str | None = None
    per_group: bool = False


def make_request(risk=DEFAULT_RISK, delta: float = DEFAULT_DELTA, method: str = DEFAULT_METHOD, *,
                 dtype: str | None = None, group_col: str | None = None, per_class: bool = False,
                 delta_per_group: bool = False, score: str | None = None, stored: bool = False) -> Request:
    """The :class:`Request` of these options, each refused in one line when it cannot be honoured;
    ``stored``: the scores are a file's column of confidences (no ``dtype`` but as stored)."""
    method, delta, risks = _check_method(method), _check_delta(delta), parse_risks(risk)
    if stored:
        if dtype is not None:
            raise OptionError("dtype", "{option} has no meaning for a file of confidences: its column is certified "
                                       "as stored; leave out {option}")
        dtype = STORED
    else:
        dtype = _check_dtype(DEFAULT_DTYPE if dtype is None else dtype, score)
    if group_col is not None and per_class:
        raise OptionError("per_class", f"{{option}} groups the rows by their predicted class and {said('group_col')} "
                                       "by a column; give one of them")
    if delta_per_group and group_col is None and not per_class:
        raise OptionError("delta_per_group", f"{{option}} is for thresholds per group; give "
                                             f"{said('group_col', metavar='G')} or {said('per_class', True)}, or leave "
                                             "out {option}")
    return Request(risks, delta, method, dtype, PER_CLASS if per_class else group_col, bool(delta_per_group))


def _check_score(name) -> str:
    if name not in REGISTRY:
        raise OptionError("score", f"{{option}}: {name!r} is not a registered score; choose one of "
                                   + ", ".join(REGISTRY))
    return name


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ThresholdEntry:
    """The threshold certified for one risk target, and what it gives on the evaluation rows.

    ``certificate`` is on the scale selcal ranks by (the score's values; a probability score's
    log); ``threshold`` on the score's own scale (a probability score: the probability) and, for
    a probability score, ``complement`` = 1 - threshold computed without cancellation.
    """

    certificate: Certificate
    evaluation: Applied
    score: str
    threshold: float | None
    probability: bool = False
    complement: float | None = None
    dtype: str = DEFAULT_DTYPE
    groups: tuple["GroupEntry", ...] | None = None
    group_by: str | None = None
    per_group: bool = False

    @property
    def combined(self) -> Applied | None:
        """The per-group rule (each row against its group's threshold) on every evaluation row."""
        return None if self.groups is None else combined([entry.group for entry in self.groups])

    def to_dict(self) -> dict:
        """The JSON object of CONVENTIONS.md (fractions; ``bound`` certified); with groups, ``groups``
        (each group's object, by name), ``group_by``, ``group_delta`` and ``combined``."""
        cert, ev = self.certificate, self.evaluation
        out = {
            "method": cert.method, "score": self.score, "risk_target": cert.risk_target, "delta": cert.delta,
            "dtype": self.dtype, "threshold": self.threshold, "abstain_all": cert.abstain_all,
            "calibration": {"n": cert.n, "coverage": cert.coverage, "risk": cert.risk, "bound": cert.bound},
            "evaluation": {"n": ev.n, "coverage": ev.coverage, "risk": ev.risk},
        }
        if self.groups is not None:
            both = self.combined
            out.update(group_by=self.group_by, group_delta="per-group" if self.per_group else "bonferroni",
                       combined={"n": both.n, "coverage": both.coverage, "risk": both.risk},
                       groups={entry.group.name: entry.to_dict() for entry in self.groups})
        return out


@dataclass(frozen=True)
class GroupEntry:
    """One group's answer (:class:`selcal.threshold.groups.GroupCertificate`) with its threshold on
    the score's own scale (``threshold``, ``complement``, as :class:`ThresholdEntry`)."""

    group: GroupCertificate
    threshold: float | None
    probability: bool = False
    complement: float | None = None

    def to_dict(self) -> dict:
        g, cert, ev = self.group, self.group.certificate, self.group.evaluation
        out = {
            "threshold": self.threshold, "abstain_all": g.abstain_all, "status": g.status, "delta": g.delta,
            "calibration": {"n": g.n_calibration, "coverage": None if cert is None else cert.coverage,
                            "risk": None if cert is None else cert.risk, "bound": None if cert is None else cert.bound},
            "evaluation": {"n": ev.n, "coverage": ev.coverage, "risk": ev.risk},
        }
        if g.minimum_rows is not None:
            out["minimum_rows"] = g.minimum_rows
        return out


@dataclass
class ThresholdResult:
    """What ``selcal threshold`` found for one model: one :class:`ThresholdEntry` per risk target.

    ``split`` names the validation rule (``val-file``, ``split-column``, ``holdout``, ...);
    ``n_fit`` the validation rows that fitted the score (0 for a score without a fit);
    ``calibration_curve`` and ``evaluation_curve`` are the risk-coverage operating points of
    the calibration and evaluation rows (for the figure); ``state`` and ``fit_note`` the fitted
    score's state and its note (the registry's).
    """

    name: str
    path: str
    score: str
    method: str
    delta: float
    split: str
    n_fit: int
    entries: list[ThresholdEntry]
    calibration_curve: RiskCoverage
    evaluation_curve: RiskCoverage
    probability: bool = False
    state: object = None
    fit_note: str = ""
    warnings: list[str] = field(default_factory=list)
    dtype: str = DEFAULT_DTYPE
    group_by: str | None = None
    per_group: bool = False

    @property
    def computed(self) -> str:
        """How the certified confidences were computed, in words: ``computed in float32``, ``as
        stored`` (a file's column of confidences)."""
        return "as stored" if self.dtype == STORED else f"computed in {self.dtype}"

    def to_dict(self):
        """The object of the one risk target, or a list of them (in the order given) for several."""
        objects = [entry.to_dict() for entry in self.entries]
        return objects[0] if len(objects) == 1 else objects

    def to_json(self) -> str:
        return json.dumps(_finite(self.to_dict()), indent=2, allow_nan=False) + "\n"

    def sentence(self, entry: ThresholdEntry) -> str:
        """The plain-words answer for one target (CONVENTIONS.md)."""
        cert, ev = entry.certificate, entry.evaluation
        confidence = f"{confidence_text(cert.delta)} confidence"
        if cert.abstain_all:
            return (f"abstain on everything: no threshold of {self.score} ({self.computed}) keeps the selective risk "
                    f"at most {target_text(cert.risk_target)} with {confidence} ({cert.method}, calibration: "
                    f"{count_text(cert.n)} rows); more calibration rows, a larger {said('risk')} or a larger "
                    f"{said('delta')} could allow one")
        evaluation = (f"on the {count_text(ev.n)} evaluation rows: coverage {pct_text(ev.coverage, 1)}, "
                      + (f"risk {pct_text(ev.risk, 1)}" if ev.risk is not None else "nothing accepted"))
        return (f"accept {self.score} >= {format_threshold(entry)} ({self.computed}): {pct_text(cert.coverage, 1)} of "
                f"new inputs, selective risk at most {target_text(cert.risk_target)} with {confidence} "
                f"(calibration: {count_text(cert.n)} rows, bound {pct_text(cert.bound, 2)}); {evaluation}")

    def group_sentence(self, entry: ThresholdEntry) -> str:
        """The grouping in words: what the groups are, the level each ran at and what holds together."""
        groups = entry.groups or ()
        covered = sum(1 for g in groups if g.group.delta is not None)
        by = "their predicted class" if self.group_by == PER_CLASS else f"column {self.group_by!r}"
        if self.per_group:
            holds = (f"each group at delta {entry.certificate.delta:.3g}: each group's guarantee holds with "
                     f"{confidence_text(entry.certificate.delta)} confidence on its own, not all together")
        else:
            level = group_delta(entry.certificate.delta, covered) if covered else entry.certificate.delta
            holds = (f"each at delta / {covered} = {level:.3g} (Bonferroni): all groups' guarantees hold together "
                     f"with {confidence_text(entry.certificate.delta)} confidence")
        both = entry.combined
        risk = "nothing accepted" if both.risk is None else f"risk {pct_text(both.risk, 1)}"
        return (f"{len(groups)} groups by {by}, {covered} with calibration rows, {holds}; each row against its "
                f"group's threshold on the {count_text(both.n)} evaluation rows: coverage {pct_text(both.coverage, 1)}, {risk}")


def confidence_text(delta: float) -> str:
    """1 - δ as percent: ``0.1`` -> ``90%``, ``0.05`` -> ``95%``, ``0.001`` -> ``99.9%``, with the digits
    it takes not to read 100%; a δ too small for that as ``(1 - 1e-300)``.

    Examples
    --------
    >>> confidence_text(0.1), confidence_text(0.001), confidence_text(1e-5), confidence_text(1e-300)
    ('90%', '99.9%', '99.999%', '(1 - 1e-300)')
    """
    for digits in range(4, 13):  # as many digits as it takes not to read 100%
        shown = f"{100 * (1 - delta):.{digits}g}"
        if float(shown) < 100:
            return f"{shown}%"
    return f"(1 - {delta:.3g})"


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def pct_text(value: float, digits: int) -> str:
    """A fraction as percent: ``0.0493`` -> ``4.93%`` (``digits`` decimals, more when a fraction strictly
    between 0 and 1 would read 0% or 100%: 4 999 of 5 000 rows is ``99.98%``, not ``100.0%``).

    Examples
    --------
    >>> pct_text(0.0493, 2), pct_text(0.9998, 1), pct_text(1.0, 1), pct_text(2e-5, 1)
    ('4.93%', '99.98%', '100.0%', '0.002%')
    """
    for extra in range(15):
        shown = f"{100 * value:.{digits + extra}f}"
        if not 0 < value < 1 or float(shown) not in (0.0, 100.0):
            return f"{shown}%"
    return f"{100 * value:.3g}%"


def target_text(value: float) -> str:
    """A target as the user gave it: ``0.05`` -> ``5.0%``, ``0.0001`` -> ``0.01%``; never a promise it
    is not (a target just below 1 never reads ``100%``, a tiny one never ``0%``).

    Examples
    --------
    >>> target_text(0.05), target_text(0.0001), target_text(0.125), target_text(0.9999999999999999), target_text(5e-324)
    ('5.0%', '0.01%', '12.5%', '99.99999999999999%', '4.94e-322%')
    """
    short = f"{100 * value:.1f}"
    if 0 < float(short) < 100 and abs(float(short) - 100 * value) < 1e-9:
        return f"{short}%"
    for digits in range(3, 18):  # as many digits as it takes not to read 0% or 100%
        shown = f"{100 * value:.{digits}g}"
        if 0 < float(shown) < 100:
            return f"{shown}%"
    return f"{100 * value!r}%"  # pragma: no cover  (17 digits always suffice)


def count_text(n: int) -> str:
    """A row count with a space between thousands, as in ``5 000`` (an astronomical one, such as the
    rows a risk of 1e-300 needs, in three digits: ``2.3e+300``, beyond float64's range too).

    Examples
    --------
    >>> count_text(5000), count_text(2 * 10 ** 300), count_text(10 ** 400 + 5 * 10 ** 398)
    ('5 000', '2e+300', '1.05e+400')
    """
    if n >= 10 ** 15:
        from decimal import Decimal

        mantissa, exponent = f"{Decimal(n):.2e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    return f"{n:,}".replace(",", " ")


def format_threshold(entry: ThresholdEntry) -> str:
    """θ for people: 6 significant digits; a probability above 0.999 as ``1 - 1.23e-05``, so that
    confidences close to 1 stay apart. None: ``-``."""
    if entry.threshold is None:
        return "-"
    if entry.probability and entry.complement is not None and entry.threshold > 0.999:
        return f"1 - {entry.complement:.3g}"
    return f"{entry.threshold:.6g}"


# --------------------------------------------------------------------------- scores
@dataclass
class ScoredRows:
    """A score on one set of rows: ``values`` (as ranked), ``correct`` (by the score's own
    predictions when it has them), ``confidence`` (its top-label probability, when it has
    probabilities; else None), ``pred`` (the predicted class whose correctness is judged, when
    known) and ``group`` (the row's group of --group-col or --per-class, when grouped)."""

    values: np.ndarray
    correct: np.ndarray
    confidence: np.ndarray | None
    pred: np.ndarray | None = None
    group: np.ndarray | None = None

    def take(self, rows) -> "ScoredRows":
        """These rows (a slice, a boolean mask or indices)."""
        pick = lambda array: None if array is None else array[rows]  # noqa: E731
        return ScoredRows(self.values[rows], self.correct[rows], pick(self.confidence), pick(self.pred),
                          pick(self.group))


@dataclass
class Scored:
    """What :func:`score_rows` returns: one :class:`ScoredRows` per part, and about the score:
    whether it is a probability (``probability``; its values are then the log of its confidence
    when it has no ``confidence``), its fitted ``state``, its fit ``note`` and the warnings."""

    parts: list[ScoredRows]
    probability: bool
    state: object = None
    note: str = ""
    warnings: list[str] = field(default_factory=list)


def score_chunks(name: str, chunks: Iterable[tuple[np.ndarray, np.ndarray]], *, n_classes: int, total: int,
                 fit: tuple | None, options, where: str = "", input_kind: str = "logits",
                 dtype: str = DEFAULT_DTYPE) -> Scored:
    """The registered score ``name`` on the rows of ``chunks`` ((logits, labels) pairs, ``total``
    rows of ``n_classes`` classes in all, e.g. a streamed file's), fitted (when it is fitted) on
    ``fit`` ((logits, labels), or None for a score without a fit); one part, in the chunks' order.

    It is evaluate's per-row pass (:func:`selcal.pipeline.reduce.reduce_rows` and the metrics of
    :func:`selcal.pipeline.measure.measure_arrays`) with one fit, chunk by chunk: every registered
    score is computed exactly as ``selcal evaluate`` computes it (its values, its own
    predictions, its probabilities), and the per-row numbers do not depend on the chunking, so
    the rows of a file read whole or streamed get the same bits. Memory: the chunks in flight
    and a few numbers per row.

    ``dtype="float32"`` (a softmax score only): the confidence is the score's softmax computed in
    float32 (:func:`selcal.threshold.precision.softmax_confidence_float32`), ranked as such (its
    ties included), and a row is right where the argmax of its float32 logits is its label.
    """
    from ..pipeline.measure import fit_scores, measure_chunks
    from ..pipeline.split import prime_allocator

    prime_allocator()  # (the chunk temporaries on the heap, not a fresh mmap each)
    entry = REGISTRY[name]
    run = replace(options, scores=(name,), score_cols=(), uncertainty_cols=(), errors_top=0, logit_profile=False)
    warnings: list[str] = []
    states = fit_scores(None if fit is None else fit[0], None if fit is None else fit[1], run, where=where,
                        warnings=warnings)
    watcher = ChunkWatcher(softmax=entry.softmax if dtype == "float32" else None, state=lambda: states.get(name),
                           dtype=dtype, where=where)
    result = measure_chunks(watcher.watch(chunks), n_classes, states, options=run, name=where, path=where, split="none",
                      n_val=0 if fit is None else int(fit[1].size), warnings=warnings,
                      extra=None if input_kind == "logits" else {"input": input_kind},  # (no warning on it)
                      groups=None, progress=None, total=total)
    rows = result.rows.scores[name]
    correct = rows.correct if rows.correct is not None else result.rows.correct
    metrics = result.scores[name]
    pred = rows.pred if rows.pred is not None else watcher.predictions()
    note = entry.display.note(metrics) if entry.display.note is not None else ""
    if dtype == "float32":
        confidence, correct = watcher.float32_rows()
        return Scored([ScoredRows(confidence, correct, confidence, pred)], True, result.states.get(name), note,
                      list(result.warnings))
    return Scored([ScoredRows(rows.values, correct, rows.confidence, pred)], entry.is_probability(metrics),
                  result.states.get(name), note, list(result.warnings))


def score_rows(name: str, parts: Sequence[tuple[np.ndarray, np.ndarray]], fit: tuple | None, options,
               where: str = "", input_kind: str = "logits", dtype: str = DEFAULT_DTYPE) -> Scored:
    """:func:`score_chunks` on in-memory parts ((logits, labels) of each set of rows to score),
    one :class:`ScoredRows` per part."""
    n_classes = int(parts[0][0].shape[1])
    rows = rows_per_chunk(n_classes, options)
    sizes = [int(labels.size) for _, labels in parts]
    chunks = (chunk for logits, labels in parts for chunk in array_chunks(logits, labels, rows))
    scored = score_chunks(name, chunks, n_classes=n_classes, total=sum(sizes), fit=fit, options=options, where=where,
                          input_kind=input_kind, dtype=dtype)
    bounds = np.cumsum([0] + sizes)
    scored.parts = [scored.parts[0].take(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]
    return scored


def _shown(theta: float | None, rows: ScoredRows, probability: bool) -> tuple[float | None, float | None]:
    """(θ on the score's own scale, 1 - θ for a probability score) of a threshold θ on its values."""
    if theta is None:
        return None, None
    if rows.confidence is not None:  # the confidence of the tie group at θ (values and confidence agree in order)
        shown = float(rows.confidence[np.flatnonzero(rows.values == theta)[0]])
        if not probability:
            return shown, None
        # values that are the log of the confidence (a softmax score) give 1 - θ without cancellation
        return shown, (-math.expm1(theta) if theta <= 0 and math.exp(theta) == shown else 1.0 - shown)
    if probability:  # values are the log of the confidence
        return math.exp(theta), -math.expm1(theta)
    return theta, None


# --------------------------------------------------------------------------- the API
def _check_available(entry, score: str, options, *sources) -> None:
    """As evaluate: a score of the logits' scale is never computed on probabilities."""
    for path, kind in sources:
        if not entry.available_on(kind, options):
            raise SelcalError(f"{path}: holds {INPUT_WORDS[kind]}, and {score} needs raw logits; choose a "
                              f"score that does not (e.g. {said('score', 'msp')} or {said('score', 'temp')})")


def _fit_half(entry, score: str, n_val: int, ids, images, image_names, options, where: str, val_path: str):
    """The validation rows that fit a fitted score (a mask; None for a score without a fit): a
    seeded half, by image for pixel rows; the other half calibrates."""
    if not entry.needs_fit:
        return None
    if n_val < 2:  # no halves to make (the hold-out's message would say --val)
        raise SelcalError(
            f"{val_path}: {count_text(n_val)} validation row cannot be halved: "
            f"{score} is fitted on a half of the validation rows and the threshold certified on the other; "
            f"give more validation rows ({_more_validation_rows()})")
    if images is not None:
        return image_holdout_mask(images, image_names, 0.5, options.seed + 1, where=where)
    return lowest_hashes(identity_hashes(n_val, ids, options.seed, purpose=FIT_HALF_PURPOSE), 0.5, where=where)


def _check_split_column(path: str, split: np.ndarray | None, has_val_file: bool) -> None:
    """Refuse, in one line, a split column that cannot be honoured without a --val file: one with no
    'val' rows (nothing to calibrate on) or only 'val' rows (nothing to measure the threshold on).
    Evaluate falls back to a seeded hold-out there; a certificate on rows the user marked otherwise
    would be silent about it."""
    if has_val_file or split is None or not split.size:
        return
    is_val = split == "val"
    if is_val.any() and not is_val.all():
        return
    values, counts = np.unique(split, return_counts=True)
    holds = ", ".join(f"{count_text(int(c))} {str(v)!r}" for v, c in zip(values.tolist(), counts.tolist()))
    if is_val.all():
        raise SelcalError(f"{path}: column 'split' holds only 'val' rows ({holds}): no evaluation rows to measure "
                          f"the threshold on; give the rows to measure it on as TEST and this file as "
                          f"{said('val', metavar='FILE')}")
    raise SelcalError(f"{path}: column 'split' has no 'val' rows (it holds {holds}): no calibration rows; give "
                      f"{said('val', metavar='FILE')}, or mark the calibration rows 'val' (a seeded hold-out is taken only from a file "
                      "without a split column)")


_PIXELS_WARNING = ("the rows are pixels of images, which are not independent: the binomial guarantee assumes "
                   "independent rows, so it is optimistic here (it counts pixels, not images)")


def _prepared(test, val, score, risk, delta, method, options, dtype, group_col, per_class, delta_per_group):
    """The options, the checked score, the request and the score's registry entry of a threshold of
    dumps read (whole or as row batches), the groups checked against what was read."""
    options = options or Options()
    score = _check_score(score)
    request = make_request(risk, delta, method, dtype=dtype, group_col=group_col, per_class=per_class,
                           delta_per_group=delta_per_group, score=score)
    _check_groups_read(request, test, val)
    return options, score, request, REGISTRY[score]


def threshold_dump(test, val=None, *, score: str = "msp", risk=DEFAULT_RISK,
                   delta: float = DEFAULT_DELTA, method: str = DEFAULT_METHOD,
                   options=None, name: str | None = None, dtype: str | None = None, per_class: bool = False,
                   delta_per_group: bool = False, group_col: str | None = None) -> ThresholdResult:
    """:func:`threshold` for dumps already read (:class:`selcal.io.Dump`); ``group_col`` names the
    column the dumps were read with (their ``groups``), for thresholds per group."""
    options, score, request, entry = _prepared(test, val, score, risk, delta, method, options, dtype, group_col,
                                               per_class, delta_per_group)
    risks, delta, method = request.risks, request.delta, request.method
    _check_available(entry, score, options, *((d.path, getattr(d, "input", "logits")) for d in (test, val) if d is not None))
    _check_split_column(test.path, test.split, val is not None)
    val_rows, eval_rows, rule = split_rows(test, val, options, needs_validation=True)
    if val_rows is None or len(val_rows) == 0:
        raise SelcalError(f"{test.path}: no validation rows to calibrate on; give "
                          f"{said('val', metavar='FILE')} or a split column")
    fit_mask = _fit_half(entry, score, len(val_rows), val_rows.ids, val_rows.images, val_rows.image_names, options,
                         test.path, val.path if val is not None else test.path)
    fit_rows, cal_rows = (None, val_rows) if fit_mask is None else (val_rows.subset(fit_mask),
                                                                     val_rows.subset(~fit_mask))
    _check_enough_rows(test.path, len(cal_rows), risks, delta, method, halved=fit_rows is not None)
    scored = score_rows(score, [(cal_rows.logits, cal_rows.labels), (eval_rows.logits, eval_rows.labels)],
                        None if fit_rows is None else (fit_rows.logits, fit_rows.labels), options, where=test.path,
                        input_kind=getattr(test, "input", "logits"), dtype=request.dtype)
    cal, ev = _grouped(request, *scored.parts, cal_rows.groups, eval_rows.groups)
    warnings = scored.warnings
    if val is not None:
        shared = count_shared_rows(eval_rows.logits, eval_rows.labels, SharedRows(val_rows.logits, val_rows.labels))
        warnings += leak_warnings(test.path, val.path, shared)
    if cal_rows.images is not None:
        warnings.append(_PIXELS_WARNING)
    return _certified(test.path, name or model_name_of(test.path), score, cal, ev, scored.probability, request=request,
                      split=rule, n_fit=0 if fit_rows is None else len(fit_rows),
                      state=scored.state, note=scored.note, warnings=warnings)


def _check_groups_read(request: Request, *dumps) -> None:
    """A --group-col needs the dumps read with that column: a streamed file opened with it (its
    ``group_col``), a dump read whole holding its ``groups``."""
    if request.group_by is None or request.group_by == PER_CLASS:
        return
    for dump in dumps:
        if dump is None:
            continue
        read_with = getattr(dump, "group_col", None) if hasattr(dump, "batches") else \
            (request.group_by if getattr(dump, "groups", None) is not None else None)
        if read_with != request.group_by:
            raise OptionError("group_col", f"{dump.path}: was read without the column {request.group_by!r}; read "
                                           "it with it (selcal.io.read_dump(path, group_col=...)), or call "
                                           "selcal.threshold(path, group_col=...)")


def _grouped(request: Request, cal: ScoredRows, ev: ScoredRows, cal_groups, ev_groups) -> tuple[ScoredRows, ScoredRows]:
    """The calibration and evaluation rows with their group (the column's value, or the predicted class)."""
    if request.group_by is None:
        return cal, ev
    if request.group_by == PER_CLASS:
        return replace(cal, group=cal.pred), replace(ev, group=ev.pred)
    return replace(cal, group=np.asarray(cal_groups)), replace(ev, group=np.asarray(ev_groups))


def threshold_source(test, val=None, *, score: str = "msp", risk=DEFAULT_RISK,
                     delta: float = DEFAULT_DELTA, method: str = DEFAULT_METHOD,
                     options=None, name: str | None = None, dtype: str | None = None, per_class: bool = False,
                     delta_per_group: bool = False, group_col: str | None = None) -> ThresholdResult:
    """:func:`threshold_dump` for a TEST file streamed by row chunks (:class:`selcal.io.DumpSource`;
    ``val`` a :class:`selcal.io.Dump` or None): the same result, bit for bit.

    The split is evaluate's (:func:`selcal.pipeline.split.split_plan` on the labels, split and id
    columns, read without the logits). Only the rows that fit a fitted score are gathered into
    memory (a seeded half of the validation rows); every other row is read once, chunk by chunk,
    and kept as its score value, whether it is right and its confidence. With a ``--val`` file,
    that file is read whole, as evaluate reads it.
    """
    from ..io.base import nothing_left_message, release_read_buffers
    from ..pipeline.split import check_same_classes, holdout_mask, rows_of, rule_name, split_plan
    from ..pipeline.stream import gather_rows, stream_chunks

    options, score, request, entry = _prepared(test, val, score, risk, delta, method, options, dtype, group_col,
                                               per_class, delta_per_group)
    risks, delta, method = request.risks, request.delta, request.method
    by_column = request.group_by not in (None, PER_CLASS)
    streamed_groups: list | None = [] if by_column else None  # the evaluation rows' groups, batch by batch
    if test.num_rows == 0:
        raise SelcalError(f"{test.path}: has no rows")
    if test.num_kept_rows == 0:
        raise SelcalError(f"{test.path}: column '{test.label_col}': {nothing_left_message(test)}")
    if test.input_kind is None and test.detected_input is None:
        next(iter(test.batches(ids=False)), None)  # the first batch says what the file holds
        release_read_buffers()  # (its decoded row group)
    kind = test.input_kind or test.detected_input or "logits"
    _check_available(entry, score, options, (test.path, kind), *([(val.path, val.input)] if val is not None else []))
    images, ids = test.image_column(), test.id_column()
    if val is not None:
        check_same_classes(test.path, test.num_classes, val.path, val.num_classes)

    def holdout() -> np.ndarray:
        if images is not None:
            return image_holdout_mask(images[0], images[1], options.val_fraction, options.seed, where=test.path)
        return holdout_mask(test.num_kept_rows, ids, options.val_fraction, options.seed, test.path)

    _check_split_column(test.path, test.split_column(), val is not None)
    rule, val_mask, eval_mask = split_plan(test.split_column(), val is not None, True, holdout)
    rule = rule_name(rule, images is not None, test.metadata)
    n_classes = max(test.num_classes, 2)
    rows = rows_per_chunk(n_classes, options)
    shared = [0]
    if val is not None:  # the --val file's rows calibrate (in memory), the TEST file's evaluate (streamed)
        val_rows = rows_of(val, "val")
        if len(val_rows) == 0:
            raise SelcalError(f"{test.path}: no validation rows to calibrate on; give "
                              f"{said('val', metavar='FILE')} or a split column")
        fit_mask = _fit_half(entry, score, len(val_rows), val_rows.ids, val_rows.images, val_rows.image_names,
                             options, test.path, val.path)
        fit_rows, cal_rows = (None, val_rows) if fit_mask is None else (val_rows.subset(fit_mask),
                                                                         val_rows.subset(~fit_mask))
        n_cal = len(cal_rows)
        _check_enough_rows(test.path, n_cal, risks, delta, method, halved=fit_rows is not None)
        n_eval = test.num_kept_rows if eval_mask is None else int(eval_mask.sum())
        chunks = chain(array_chunks(cal_rows.logits, cal_rows.labels, rows),
                       stream_chunks(test, eval_mask, rows, streamed_groups,
                                      SharedRows(val_rows.logits, val_rows.labels), shared))
        fit = None if fit_rows is None else (fit_rows.logits, fit_rows.labels)
        total = n_cal + n_eval
        is_cal, is_eval = slice(0, n_cal), slice(n_cal, total)
        pixels = val_rows.images is not None
    else:  # the TEST file's validation rows calibrate (a half fits a fitted score), the others evaluate
        positions = np.flatnonzero(val_mask)
        fit_mask = _fit_half(entry, score, positions.size, None if ids is None else ids[positions],
                             None if images is None else images[0][positions], None if images is None else images[1],
                             options, test.path, test.path)
        cal_mask = val_mask.copy()
        fit = None
        if fit_mask is not None:
            cal_mask[positions[fit_mask]] = False
            fitted = gather_rows(test, val_mask & ~cal_mask)  # the only rows held in memory
            fit = (fitted.logits, fitted.labels)
        n_cal = int(cal_mask.sum())
        _check_enough_rows(test.path, n_cal, risks, delta, method, halved=fit is not None)
        scored_mask = cal_mask | eval_mask  # in file order; the fit half is not scored
        chunks = stream_chunks(test, scored_mask, rows, streamed_groups)
        total = int(scored_mask.sum())
        is_cal = cal_mask[scored_mask]
        is_eval = ~is_cal
        pixels = images is not None
    scored = score_chunks(score, chunks, n_classes=n_classes, total=total, fit=fit, options=options,
                          where=test.path, input_kind=kind, dtype=request.dtype)
    everything, = scored.parts
    cal, ev = everything.take(is_cal), everything.take(is_eval)
    if by_column:
        streamed = np.concatenate(streamed_groups) if streamed_groups else np.empty(0, dtype=object)
        if val is not None:
            cal_groups, ev_groups = cal_rows.groups, streamed
        else:
            cal_groups, ev_groups = streamed[is_cal], streamed[is_eval]
    else:
        cal_groups = ev_groups = None
    cal, ev = _grouped(request, cal, ev, cal_groups, ev_groups)
    warnings = scored.warnings
    if val is not None:
        warnings += leak_warnings(test.path, val.path, shared[0])
    if pixels:
        warnings.append(_PIXELS_WARNING)
    return _certified(test.path, name or model_name_of(test.path), score, cal, ev, scored.probability, request=request,
                      split=rule, n_fit=0 if fit is None else int(fit[1].size),
                      state=scored.state, note=scored.note, warnings=warnings)


def _more_validation_rows() -> str:
    """Where more validation rows come from, in the caller's words (``--val FILE``, or ``val=FILE``)."""
    return f"{said('val', metavar='FILE')}, a split column or a larger {said('val_fraction')}"


def _check_enough_rows(path: str, n_cal: int, risks, delta: float, method: str, halved: bool = False) -> None:
    """Refuse (one line) calibration rows too few to certify any target even with no error."""
    for target in risks:
        needed = minimum_rows(target, delta, method)
        if n_cal < needed:
            halves = " (half of the validation rows: the other half fits the score)" if halved else ""
            raise SelcalError(
                f"{path}: {count_text(n_cal)} calibration rows{halves} cannot certify a selective risk of "
                f"at most {target_text(target)} with {confidence_text(delta)} confidence: {method} needs at least "
                f"{count_text(needed)} rows even with no error; give more validation rows ({_more_validation_rows()}), "
                f"a larger {said('risk')} or a larger {said('delta')}")


def _certified(path: str, name: str, score: str, cal: ScoredRows, ev: ScoredRows, probability: bool, *,
               request: Request, split: str, n_fit: int = 0, state=None, note: str = "",
               warnings: list[str]) -> ThresholdResult:
    """Certify every target on the calibration rows ``cal``, measure it on the evaluation rows ``ev``;
    with groups (``cal.group``), each group's threshold too (:func:`certify_groups`)."""
    curve = risk_coverage(cal.values, cal.correct)
    delta, method = request.delta, request.method
    entries = []
    for target in request.risks:
        cert = certify(curve, risk=target, delta=delta, method=method)
        shown, complement = _shown(cert.threshold, cal, probability)
        groups = None
        if cal.group is not None:
            try:
                found = certify_groups(cal.values, cal.correct, cal.group, ev.values, ev.correct, ev.group, risk=target,
                                       delta=delta, method=method, per_group=request.per_group)
            except ValueError as exc:
                raise OptionError("delta", f"{{option}}: {exc}") from None
            groups = tuple(_group_entry(g, cal, probability) for g in found)
        entries.append(ThresholdEntry(cert, apply_threshold(ev.values, ev.correct, cert.threshold), score, shown,
                                      probability, complement, request.dtype, groups, request.group_by,
                                      request.per_group))
    broken = [e for e in entries if e.evaluation.risk is not None and e.evaluation.risk > e.certificate.risk_target]
    if broken:
        warnings.append(
            "on the evaluation rows the risk exceeds the target at "
            + ", ".join(f"{target_text(e.certificate.risk_target)} ({pct_text(e.evaluation.risk, 2)})" for e in broken)
            + f"; the guarantee (each with probability >= {confidence_text(delta)}) is for new rows drawn like the "
            f"calibration rows: their accuracy is {pct_text(1 - curve.n_errors / curve.n, 2)}, the evaluation rows' "
            f"{pct_text(1 - float(np.count_nonzero(~ev.correct)) / ev.correct.size, 2)}")
    if cal.group is not None:
        warnings.extend(_group_warnings(entries))
    return ThresholdResult(
        name=name, path=path, score=score, method=method, delta=delta, split=split, n_fit=n_fit, entries=entries,
        calibration_curve=curve, evaluation_curve=risk_coverage(ev.values, ev.correct), probability=probability,
        state=state, fit_note=note, warnings=warnings, dtype=request.dtype, group_by=request.group_by,
        per_group=request.per_group,
    )


def _group_entry(group: GroupCertificate, cal: ScoredRows, probability: bool) -> GroupEntry:
    shown, complement = _shown(group.threshold, cal, probability)
    return GroupEntry(group, shown, probability, complement)


def _names(groups, limit: int = 8) -> str:
    """Group names for a warning, quoted, at most ``limit`` of them."""
    names = [repr(entry.group.name) for entry in groups]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _group_warnings(entries: list[ThresholdEntry]) -> list[str]:
    """What a user must know of the groups: those too small for any guarantee, those with no
    calibration row, and, per target, those whose evaluation rows break it."""
    from .groups import TOO_FEW_ROWS, UNCOVERED

    first = entries[0].groups
    out = []
    uncovered = [g for g in first if g.group.status == UNCOVERED]
    if uncovered:
        out.append(f"{len(uncovered)} group{'s' if len(uncovered) > 1 else ''} ({_names(uncovered)}) "
                   f"{'have' if len(uncovered) > 1 else 'has'} evaluation rows but no calibration row: uncovered, "
                   "nothing is certified for them and the per-group rule rejects their rows")
    for entry in entries:
        small = [g for g in entry.groups if g.group.status == TOO_FEW_ROWS]
        if small:
            g = small[0].group
            out.append(f"at {target_text(entry.certificate.risk_target)}, {len(small)} group{'s' if len(small) > 1 else ''} "
                       f"({_names(small)}) {'have' if len(small) > 1 else 'has'} fewer calibration rows than the "
                       f"{count_text(g.minimum_rows)} any guarantee at delta {g.delta:.3g} needs: "
                       f"{'they abstain' if len(small) > 1 else 'it abstains'} on everything")
        broken = [g for g in entry.groups if g.group.evaluation.risk is not None
                  and g.group.evaluation.risk > entry.certificate.risk_target]
        if broken:
            out.append(f"on the evaluation rows the risk exceeds {target_text(entry.certificate.risk_target)} in "
                       + ", ".join(f"{g.group.name!r} ({pct_text(g.group.evaluation.risk, 2)} of "
                                   f"{count_text(g.group.evaluation.accepted)} accepted rows)" for g in broken[:8])
                       + ("" if len(broken) <= 8 else f" and {len(broken) - 8} more groups"))
    return out


# --------------------------------------------------------------------------- files of confidences
def threshold_confidences(test, val=None, *, column: str | None = None, risk=DEFAULT_RISK,
                          delta: float = DEFAULT_DELTA, method: str = DEFAULT_METHOD, options=None,
                          name: str | None = None, dtype: str | None = None, per_class: bool = False,
                          delta_per_group: bool = False) -> ThresholdResult:
    """:func:`threshold` for a file with no logits, only a confidence, a prediction and a label per
    row (:class:`selcal.io.confidence.ConfidenceSource`; ``val`` another such file or None).

    The score is the file's column ``column`` (default ``confidence``; higher = more confident),
    nothing is fitted: every validation row calibrates. A row is an error when its prediction is
    not its label. The rows are split by evaluate's rule (``--val``, the split column, the seeded
    hold-out by position). A column whose values all lie in [0, 1] is a probability (θ near 1 is
    shown as ``1 - x``).
    """
    from ..io.confidence import CONFIDENCE_NAME
    from ..pipeline.split import holdout_mask, split_plan

    options = options or Options()
    request = make_request(risk, delta, method, dtype=dtype, per_class=per_class, delta_per_group=delta_per_group,
                           stored=True)
    risks, delta, method = request.risks, request.delta, request.method
    advice = (f"give {said('score_col')} one of them" if column else
              f"name the confidence column with {said('score_col', metavar='COLUMN')}")
    column = column or CONFIDENCE_NAME
    for source in (test, val):
        if source is not None and column not in source._names:
            raise SelcalError(f"{source.path}: no column '{column}' (columns: {', '.join(source._names)}); {advice}")
    _check_split_column(test.path, test.split_column(), val is not None)
    rule, val_mask, eval_mask = split_plan(
        test.split_column(), val is not None, True,
        lambda: holdout_mask(test.num_kept_rows, test.id_column(), options.val_fraction, options.seed, test.path))

    read: dict = {}  # each file's column and correctness, read once (TEST gives both parts without --val)

    def rows(source, mask) -> ScoredRows:
        if id(source) not in read:
            read[id(source)] = ScoredRows(source.value_column(column), source.predictions == source.labels, None,
                                          np.asarray(source.predictions))
        return read[id(source)] if mask is None else read[id(source)].take(mask)

    if val is not None:
        split = val.split_column()
        cal = rows(val, (split == "val") if split is not None and (split == "val").any() else None)  # as rows_of
    else:
        cal = rows(test, val_mask)
    ev = rows(test, eval_mask)
    if cal.values.size == 0:
        raise SelcalError(f"{test.path}: no validation rows to calibrate on; give "
                          f"{said('val', metavar='FILE')} or a split column")
    _check_enough_rows(test.path, cal.values.size, risks, delta, method)
    probability = all(part.values.min() >= 0.0 and part.values.max() <= 1.0 for part in (cal, ev))
    if probability:  # the threshold is shown as the probability it is (1 - x near 1)
        cal, ev = (replace(part, confidence=part.values) for part in (cal, ev))
    warnings = [] if val is None else leak_warnings(test.path, val.path, 0)  # (rows without logits: no content check)
    cal, ev = _grouped(request, cal, ev, None, None)
    return _certified(test.path, name or model_name_of(test.path), column, cal, ev, probability, request=request,
                      split=rule, warnings=warnings)


def threshold(test, val=None, *, score: str | None = None, risk=DEFAULT_RISK,
              delta: float = DEFAULT_DELTA, method: str = DEFAULT_METHOD, options=None, score_col: str | None = None,
              label_col: str | None = None, logits_col: str | None = None, ignore_label: int | None = None,
              input_kind: str | None = None, ood_label: int | None = None, lm_choices: int | None = None,
              lm_norm: str | None = None,
              stream: bool | None = None, memory_budget: int | None = None, dtype: str | None = None,
              group_col: str | None = None, per_class: bool = False, delta_per_group: bool = False,
              **option_values) -> ThresholdResult:
    """The lowest confidence threshold whose selective risk on new data is at most ``risk`` with
    probability at least 1 - ``delta``; the Python API behind ``selcal threshold``.

    Parameters
    ----------
    test : path of the TEST dump (Parquet, .npz, ...): its evaluation rows measure the threshold,
        and, without ``val``, its split column or a seeded hold-out gives the validation rows.
    val : path of a validation dump (optional), as ``selcal evaluate --val``.
    score : a registered score (``msp``, ``temp``, ...; see ``selcal.scores.REGISTRY``); default
        ``msp``. A file of confidences without logits has none: leave it out.
    score_col : a file of confidences without logits (a confidence, a prediction and a label per
        row, as ``selcal evaluate`` reads it): the column certified on (default ``confidence``);
        nothing is fitted (:func:`threshold_confidences`).
    risk : the target selective risk r in (0, 1), or several (a list or ``"0.01,0.05"``).
    delta : δ in (0, 1): the guarantee holds with probability at least 1 - δ.
    method : ``sgr`` (Geifman & El-Yaniv 2017) or ``ltt`` (Learn then Test, fixed sequence).
    options : :class:`selcal.Options` for the score's fit and the split (``val_fraction``,
        ``seed``, ``p_grid``, ...); or give its fields as keyword arguments.
    input_kind, ood_label : as :func:`selcal.evaluate` (``--input``, ``--ood-label``): what the
        files hold (detected by default), and the label of rows of no class, which are errors
        wherever they are accepted and are never fitted on.
    stream, memory_budget : read the TEST file by row chunks (:func:`threshold_source`) instead of
        whole; by default when its logits take more than ``memory_budget`` bytes (evaluate's
        budget). Either way the result is the same, bit for bit.
    lm_choices : ``--lm-choices K``: of an lm-evaluation-harness log whose questions have
        different numbers of choices, the questions of K choices (one model); such a log without
        it is refused, naming the line of the first question of another count.
    lm_norm : ``--lm-norm``: a harness log's length normalisation, as :func:`selcal.evaluate`
        (``none``, ``chars``: lm-eval's ``acc_norm``, ``bytes``: ``acc_bytes``).
    dtype : ``--dtype``: the precision the confidences are computed at, ``float64`` (selcal's own,
        the default) or ``float32`` (a softmax score computed in float32 throughout, as a service
        usually runs it); the certificate holds for that precision, and the output names it.
    group_col, per_class : a threshold per group of the column ``group_col``, or per predicted
        class; every group's guarantee holds together with probability at least 1 - ``delta``
        (each group at delta / G, G the groups with calibration rows), or each on its own with
        ``delta_per_group``. A group too small for any guarantee abstains on everything; a group
        with no calibration row is uncovered.

    Returns
    -------
    ThresholdResult
        ``.entries[i].threshold`` (None: abstain on everything), ``.to_dict()`` the JSON.

    References
    ----------
    Geifman & El-Yaniv, "Selective classification for deep neural networks", NeurIPS 2017;
    Angelopoulos et al., "Learn then Test: calibrating predictive algorithms to achieve risk
    control", 2021.

    Examples
    --------
    >>> result = selcal.threshold("sample_logits/markus93_densenet40_c10.parquet", risk=0.05)  # doctest: +SKIP
    >>> result.entries[0].threshold  # doctest: +SKIP
    """
    from ..io import open_dump, read_dump

    options = resolve_options(options, option_values, "threshold")
    if score is not None:
        _check_score(score)
    grouping = dict(dtype=dtype, group_col=group_col, per_class=per_class, delta_per_group=delta_per_group)
    make_request(risk, delta, method, **grouping, score=score or "msp")  # refused before reading
    read = dict(label_col=label_col, logits_col=logits_col, ignore_label=ignore_label, input_kind=input_kind,
                ood_label=ood_label, lm_norm=lm_norm)  # (lm_norm: a log's setting only)
    if group_col is not None:
        read["group_col"] = group_col
    (test_path, settings, name), = _one_model(test, lm_choices, lm_norm)
    source = open_dump(test_path, **read, **settings)
    if group_col is not None and group_col == getattr(source, "label_col", None):
        raise OptionError("group_col", f"{source.path}: {{option}} {group_col} is the label column, which a deployed "
                                       "model does not know, so a threshold per label cannot be applied; group by a "
                                       f"column known when the model runs (e.g. source or site), or use {said('per_class', True)} "
                                       "(the predicted class)")
    if getattr(source, "confidence_only", False):
        _check_confidence_options(source.path, score=score, input_kind=input_kind, ood_label=ood_label)
        val_source = None if val is None else open_dump(val, **read)
        if val_source is not None and not getattr(val_source, "confidence_only", False):
            raise SelcalError(f"{val_source.path}: holds logits, but {source.path} only confidences; give a {said('val')} file "
                              "of confidences (a confidence, a prediction and a label per row)")
        return threshold_confidences(source, val_source, column=score_col, risk=risk, delta=delta, method=method,
                                     options=options, name=name, dtype=dtype, per_class=per_class,
                                     delta_per_group=delta_per_group)
    if score_col is not None:
        raise OptionError("score_col", f"{source.path}: holds logits; {{option}} is for a file of "
                                       f"confidences without logits: choose a registered score with {said('score')}")
    from ..pipeline.jobs import DEFAULT_MEMORY_BUDGET

    if stream is None:
        stream = source.logits_bytes > (DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
    test_dump = None if stream else source.read_all()
    val_dump = None if val is None else read_dump(val, **read, lm_choices=lm_choices)  # (a log's setting only)
    run = threshold_source if stream else threshold_dump
    return run(source if stream else test_dump, val_dump, score=score or "msp", risk=risk, delta=delta, method=method,
               options=options, name=name, **grouping)


def _check_confidence_options(path: str, *, score, input_kind, ood_label) -> None:
    """Refuse, in one line, what has no meaning on a file of confidences without logits."""
    if score is not None:
        raise OptionError("score", f"{path}: holds no logits, only a confidence, a prediction and a label "
                                   f"per row, so {{option}} {score} cannot be computed on it; leave out {{option}} to "
                                   f"certify its column 'confidence', or name another column with "
                                   f"{said('score_col', metavar='COLUMN')}")
    for option, value, why in (("input_kind", input_kind, "it holds no logits"),
                               ("ood_label", ood_label, "a row is an error where its prediction is not its label")):
        if value is not None:
            raise OptionError(option, f"{path}: {{option}} has no meaning for a file of confidences ({why}); "
                                       "leave out {option}")


def _one_model(test, lm_choices: int | None, lm_norm: str | None = None) -> list[tuple[str, dict, str | None]]:
    """The one model of the TEST path, as :func:`selcal.io.expand_input` gives it; ``lm_choices``
    picks the questions of one choice count of an lm-evaluation-harness log. Refused: several
    models (logs), a mixed log without ``lm_choices`` (the reader's own refusal, naming the line),
    ``lm_choices`` or ``lm_norm`` on anything but a log, or a count the log does not hold."""
    from ..io import expand_input, lmeval, open_dump

    models = expand_input(test)  # an lm-evaluation-harness log or folder of logs: one model per log and choice count
    logs = list(dict.fromkeys(path for path, _, name in models if name is not None))
    for option, value in (("lm_choices", lm_choices), ("lm_norm", lm_norm)):
        if value is not None and not logs:
            raise OptionError(option, f"{test}: {{option}} is for lm-evaluation-harness sample logs "
                                      "(samples_<task>_<date>.jsonl), and this is not one; leave out {option}")
    if len(logs) > 1 or (len(models) > 1 and not logs):
        names = ", ".join(name or path for path, _, name in models[:4]) + (", ..." if len(models) > 4 else "")
        raise SelcalError(f"{test}: holds {len(models)} models ({names}); a threshold is for one model: give one "
                          f"log (with {said('lm_choices', metavar='K')} for the questions of K choices)")
    if lm_choices is None:
        if len(models) > 1:  # one log of several choice counts: the reader's refusal names the line
            open_dump(logs[0], lm_norm=lm_norm)
            raise AssertionError(f"{logs[0]}: a log of several choice counts was read as one")  # pragma: no cover
        return models
    counts = lmeval.choice_counts(logs[0])
    if lm_choices not in counts:
        raise OptionError("lm_choices", f"{logs[0]}: has no question of {lm_choices} choices (it has "
                                        f"{', '.join(map(str, counts))}); give {{option}} one of them")
    name = lmeval.model_name(logs[0]) + (f" ({lm_choices} choices)" if len(counts) > 1 else "")
    return [(logs[0], {"lm_choices": lm_choices}, name)]

