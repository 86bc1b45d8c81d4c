"""The score registry: every question asked of a score by name is answered by its entry.

A score turns a chunk of logits into one confidence per row (higher = more confident),
optionally after a fit on the validation rows, and optionally with the N x K probabilities
of the classifier it stands for (then the calibration metrics, NLL, Brier and class-wise
ECE apply to it). Everything else in selcal (the evaluation plan, the bootstrap and its
refits, the JSON, the tables, the leaderboard, the figures, the HTML report, ``check`` and
``compare``, the options that have no effect) asks the entries below; no other module
lists score names.

Adding a score is one :class:`Score` entry (built in: in :mod:`selcal.scores.builtin`;
from your own code: :func:`register_score`; from a package: an entry point of the group
``selcal.scores`` naming a :class:`Score` or a function that registers scores).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .functions import ChunkTerms, log_msp

__all__ = ["Score", "Display", "REGISTRY", "ORIGIN", "add", "register_score", "score_names", "get", "fitted",
           "is_builtin"]


@dataclass(frozen=True)
class Display:
    """How a score is shown to people; nothing here changes a number (that is :class:`Score`'s).

    Parameters
    ----------
    label : its name for people (figure legends and titles); default ``name``.
    description : one line saying what it is (``--help``, the README table).
    note : ``metrics -> str``, the fit note under the table and in the HTML report.
    note_rank : where its note stands among the notes (lower first).
    legend : ``metrics -> str``, what was fitted, in a figure legend (``" (T = 2.28)"``).
    sweep_label : its line in the ECE panels of the sweep figure (None: not drawn there).
    colour : its colour in the figures (None: the next colour of the cycle).
    line : its line style in the figures (None: solid).
    leaderboard : columns it adds to the leaderboard, after its AURC (see :class:`BoardColumn`).
    """

    label: str | None = None
    description: str = ""
    note: Callable[[dict], str] | None = None
    note_rank: int = 100
    legend: Callable[[dict], str] | None = None
    sweep_label: str | None = None
    colour: str | None = None
    line: Any = None
    leaderboard: tuple = ()


@dataclass(frozen=True)
class Score:
    """One confidence score (higher = more confident): how it is computed (and fitted, resampled,
    chosen); how it is shown is its :class:`Display`.

    Parameters
    ----------
    name : its name in ``--scores``, the JSON, the tables and the leaderboard (``aurc_NAME``).
    score : ``(terms, state) -> float64 (N,)``, the confidence of every row of a chunk;
        ``terms`` is a :class:`~selcal.scores.functions.ChunkTerms` (``terms.logits`` is the
        float64 chunk, ``terms.softmax`` the shared softmax terms at T = 1), ``state`` what
        ``fit`` returned (None for a score without a fit). A probability score may return
        the log of its top-label probability (same order, more precision near 1): say so
        with ``log_confidence=True``.
    fit : ``(val_logits, val_labels, options) -> state``, fitted on the validation rows only
        (and again on every resample of ``--bootstrap-refit``). ``options`` is the
        :class:`~selcal.options.Options` of the run.
    probabilities : ``(terms, state) -> float64 (N, K)``, the probabilities of the classifier
        the score stands for: then ECE, adaptive ECE, MCE, NLL, Brier and class-wise ECE are
        computed from them, and, when ``own_predictions``, its own top label decides which
        rows are errors (CONVENTIONS.md, "Post-hoc calibrators").
    softmax : built-in fast path of ``probabilities``: ``(terms, state) -> (z, beta, pred)``
        when the probabilities are softmax(beta z) (``pred``: their argmax if known, else None).
    raw_logits : it reads the logits' scale, not only their differences within a row, so it
        means nothing when the logits are log-probabilities (or probabilities).
    shift_invariant_when : ``options -> bool``, for a ``raw_logits`` score: under which options it
        reads only the differences within a row after all (the centred p-norm sees v - mean(v)),
        so log-probabilities, the logits shifted per row, give it the same values (see
        :meth:`reads_scale`).
    own_predictions : its probabilities may have another argmax than the logits (a
        calibrator): its accuracy is reported and its errors are its own.
    model_probabilities : its probabilities are the model's own softmax (msp): the tables show
        the model's NLL, Brier and class-wise ECE under it.
    reports : which per-row probability metrics it reports beyond ECE, adaptive ECE and MCE
        (``("nll", "brier", "cece")``; ``()`` when they are the model's own, as for msp).
    describe : ``(state, measured) -> dict``, the keys written after its metrics in the JSON
        (the fitted values; ``measured`` holds its NLL, Brier and class-wise ECE when it
        reports them). Default: ``measured``, then ``{"state": state}`` when fitted.
    warnings : ``state -> list[str]``, warnings about the data that the fit found.
    precheck : ``(n_val, n_classes, options) -> None``, raises :class:`~selcal.errors.SelcalError` for a
        fit known to be refused from the sizes alone (dirichlet's memory); every chosen score's runs
        before the first fit, so a refusal never comes after minutes of other fits.
    per_class : it fits a map per class from that class's validation rows (vector, dirichlet,
        isotonic): a class without validation rows gets none, and the calibrated classifier then
        (almost) never predicts it; the evaluation warns, naming the classes.
    options : the fields of Options its fit or its values read (an option that no chosen score
        reads is named as ignored by the CLI).
    interval_keys : keys of ``describe`` that get a bootstrap interval when refitted (``temperature``).
    probability_when : ``metrics -> bool``, whether its values are probabilities for this fit
        (default: it has probabilities); e.g. pnorm when it falls back to MSP.
    extra_rows : ``(terms, state, options) -> dict``, further per-row arrays kept for the figures.
    groups : names of ``--scores`` groups it belongs to (``calibrators``: msp, temp and the post-hoc
        calibrators).
    in_all : chosen by ``--scores all`` (the calibrators are not: dirichlet is refused for a large K,
        and each fit costs more than the rest of a run; ``--scores calibrators`` chooses them).
    display : how it is shown to people (:class:`Display`: its label, colours, notes, leaderboard
        columns); nothing of it changes a number.
    reproducible_to : for a fit solved by a library's iterative solver (``scipy.optimize``), the relative
        tolerance within which its fitted values, and every number derived from them, are reproducible
        across releases of numpy and scipy: another release may stop at another point inside the fit's
        certificate (CONVENTIONS.md, "Reproducibility"). None (the default): its numbers are exact, the
        same bytes on every machine and release.
    """

    name: str
    score: Callable[[ChunkTerms, Any], np.ndarray] | None = None
    fit: Callable[[np.ndarray, np.ndarray, Any], Any] | None = None
    probabilities: Callable[[ChunkTerms, Any], np.ndarray] | None = None
    softmax: Callable[[ChunkTerms, Any], tuple] | None = None
    raw_logits: bool = False
    shift_invariant_when: Callable[[Any], bool] | None = None
    own_predictions: bool = True
    log_confidence: bool = False
    model_probabilities: bool = False
    reports: tuple[str, ...] = ("nll", "brier", "cece")
    describe: Callable[[Any, dict], dict] | None = None
    warnings: Callable[[Any], list] | None = None
    precheck: Callable[[int, int, Any], None] | None = None
    per_class: bool = False
    options: tuple[str, ...] = ()
    interval_keys: tuple[str, ...] = ()
    probability_when: Callable[[dict], bool] | None = None
    extra_rows: Callable[[ChunkTerms, Any, Any], dict] | None = None
    groups: tuple[str, ...] = ()
    in_all: bool = True
    reproducible_to: float | None = None
    display: Display = Display()

    @property
    def needs_fit(self) -> bool:
        """Fitted on the validation rows (so it needs some)."""
        return self.fit is not None

    @property
    def refitted(self) -> bool:
        """Refitted on every resample of ``--bootstrap-refit``: every fitted score is."""
        return self.fit is not None

    @property
    def has_probabilities(self) -> bool:
        """It yields probabilities, so the calibration metrics apply to it."""
        return self.probabilities is not None or self.softmax is not None

    @property
    def shown_as(self) -> str:
        """Its name for people (figures, report)."""
        return self.display.label or self.name

    def reads_scale(self, options) -> bool:
        """Whether, under ``options``, its values change when each row of logits is shifted (as
        log-probabilities are): ``raw_logits`` unless ``shift_invariant_when(options)``."""
        return self.raw_logits and not (self.shift_invariant_when is not None and self.shift_invariant_when(options))

    def available_on(self, kind: str, options) -> bool:
        """Whether it is computed on a file holding ``kind`` (``logits``, ``probs``, ``logprobs``).

        On probabilities no ``raw_logits`` score is (CONVENTIONS.md, "Input"; log 0 = -inf where a
        probability underflowed); log-probabilities are the logits shifted per row, so only the
        scores that read the shift (:meth:`reads_scale`) are left out.
        """
        if kind == "logits":
            return True
        return not (self.raw_logits if kind == "probs" else self.reads_scale(options))

    def is_probability(self, metrics: dict) -> bool:
        """Whether its values (as kept: exp of a log confidence) are probabilities, given its metrics."""
        if self.probability_when is not None:
            return bool(self.probability_when(metrics))
        return self.has_probabilities

    def values(self, logits: np.ndarray, state=None) -> np.ndarray:
        """Its values on rows of ``logits`` (e.g. the pixels of one image) with a fitted ``state``:
        those the evaluation gives the same rows."""
        terms = ChunkTerms(np.asarray(logits, dtype=np.float64))
        if self.score is not None:
            return self.score(terms, state)
        if self.probabilities is not None:
            return np.max(self.probabilities(terms, state), axis=1)
        z, beta, _ = self.softmax(terms, state)
        return log_msp(z, beta)

    def json_keys(self, state, measured: dict) -> dict:
        """The keys written after its metrics in the JSON."""
        if self.describe is not None:
            return self.describe(state, measured)
        return {**measured, **({"state": state} if self.fit is not None else {})}


@dataclass(frozen=True)
class BoardColumn:
    """A leaderboard column a score adds (e.g. pnorm's ``p``, temp's ``ece_temp``).

    ``key``: the column; ``header``, ``short``: its header (wide, narrow terminal); ``kind``:
    ``pct``, ``int``, ``num`` or ``text``; ``lower_is_better``: True, False or None (not
    sorted by direction); ``value``: ``scores dict of the model -> value`` (the model's
    ``scores``); ``place``: ``"score"`` (right after the score's AURC) or ``"summary"``
    (after the best post-hoc score, ordered by ``rank``); ``note``: its words in the
    leaderboard's footnote; ``flag``: ``scores -> bool``, marks the cell (``(fb)``) and
    ``flag_key``/``flag_note`` name it in the CSV and the footnote.
    """

    key: str
    header: str
    value: Callable[[dict], Any]
    kind: str = "pct"
    lower_is_better: bool | None = True
    place: str = "score"
    rank: int = 0
    short: str | None = None
    note: str = ""
    flag: Callable[[dict], Any] | None = None
    flag_key: str | None = None
    flag_note: str = ""
    title: str | None = None


REGISTRY: dict[str, Score] = {}
# Where each entry was registered, for messages: BUILT_IN, "register_score in MODULE" or the entry point.
ORIGIN: dict[str, str] = {}
BUILT_IN = "built into selcal"
registering: list[str] = []  # the entry point being loaded (selcal.scores.plugins), which every add names


def add(entry: Score, *, origin: str | None = None) -> Score:
    """Add an entry to :data:`REGISTRY` (its order is the order of the report's columns). A name
    already registered is refused, naming both registrations."""
    if not isinstance(entry, Score):
        raise TypeError("add() takes a selcal.scores.Score")
    function = entry.score or entry.probabilities or entry.softmax
    module = getattr(function, "__module__", None) or "?"
    origin = (registering[-1] if registering else origin) or (
        BUILT_IN if module.startswith("selcal.") else f"add in {module}")
    if not entry.name or entry.name == "all" or "," in entry.name or "." in entry.name:
        raise ValueError(f"a score needs a name without ',' or '.', other than 'all'; got {entry.name!r} ({origin})")
    if entry.name in REGISTRY:
        raise ValueError(f"score {entry.name!r} ({origin}) is refused: the name is already registered "
                         f"({ORIGIN.get(entry.name, 'registered')}); give it another name")
    if entry.score is None and not entry.has_probabilities:
        raise ValueError(f"score {entry.name!r} needs a score function")
    REGISTRY[entry.name] = entry
    ORIGIN[entry.name] = origin
    return entry


def is_builtin(name: str) -> bool:
    """Whether the score ``name`` is one of selcal's own (its exceptions are selcal's bugs)."""
    return ORIGIN.get(name) == BUILT_IN


def register_score(name: str, *, score: Callable[[np.ndarray, Any], np.ndarray],
                   fit: Callable[[np.ndarray, np.ndarray, Any], Any] | None = None,
                   probabilities: Callable[[np.ndarray, Any], np.ndarray] | None = None,
                   description: str = "", label: str | None = None, raw_logits: bool = False,
                   options: tuple[str, ...] = ()) -> Score:
    """Register a confidence score from your own code; it then flows through everything.

    Parameters
    ----------
    name : its name (``--scores NAME``, the JSON, the tables, ``check``'s ``NAME.aurc``).
    score : ``score(logits, state)``: float64 logits (N, K) of a chunk of rows and the fitted
        state (None without ``fit``) -> one confidence per row, higher = more confident.
    fit : ``fit(val_logits, val_labels, options)`` -> a JSON-serialisable state, fitted on the
        validation rows (and refitted on every resample of ``--bootstrap-refit``); it is
        written to the JSON under the score's ``"state"``.
    probabilities : ``probabilities(logits, state)`` -> (N, K) probabilities (rows summing to 1);
        the calibration metrics, NLL, Brier and class-wise ECE are then computed from them,
        and its own top label decides its accuracy and errors.
    description, label : one line saying what it is; its name in figures.
    raw_logits : it means nothing on log-probabilities (it reads the logits' scale).
    options : fields of :class:`selcal.Options` its fit reads.

    Returns
    -------
    Score
        The registry entry. The values are computed chunk by chunk (the same numbers whether the
        file is read whole or streamed).

    Examples
    --------
    >>> import numpy as np, selcal
    >>> def fit(val_logits, val_labels, options):
    ...     return {"shift": float(np.mean(val_logits))}
    >>> entry = selcal.register_score("shifted_max", score=lambda v, s: v.max(axis=1) - s["shift"], fit=fit)
    >>> result = selcal.evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [1.0, 0.5]], [0, 1, 1, 0],
    ...                                 [[1.0, 0.0], [0.0, 2.0]], [0, 1], scores="msp,shifted_max")
    >>> result.scores["shifted_max"]["state"]
    {'shift': 0.75}
    >>> _ = REGISTRY.pop("shifted_max")
    """
    user_score = score
    user_probabilities = probabilities

    def probabilities_of(terms: ChunkTerms, state) -> np.ndarray:
        return user_probabilities(terms.logits, state)  # (checked by selcal.scores.validate)

    return add(Score(
        name=name, display=Display(label=label, description=description), raw_logits=raw_logits,
        options=tuple(options), score=lambda terms, state: user_score(terms.logits, state),
        fit=fit, probabilities=None if probabilities is None else probabilities_of,
    ), origin=f"register_score in {getattr(score, '__module__', None) or '?'}")


def get(name: str) -> Score | None:
    """The entry of ``name``, or None (e.g. a column of the file read as a score)."""
    return REGISTRY.get(name)


def fitted(names) -> tuple[str, ...]:
    """The names among ``names`` whose score is fitted on validation rows."""
    return tuple(n for n in names if n in REGISTRY and REGISTRY[n].needs_fit)


def score_names(text_or_names) -> tuple[str, ...]:
    """The registered names meant by ``"all"`` or a list of names, in registry order
    (unknown names follow, for the caller to refuse).

    Examples
    --------
    >>> score_names(["temp", "msp"])
    ('msp', 'temp')
    >>> score_names(["all"])[:4]
    ('msp', 'max_logit', 'pnorm', 'temp')
    >>> score_names(["calibrators"])
    ('msp', 'temp', 'vector', 'dirichlet', 'ets', 'isotonic')
    """
    names = list(text_or_names)
    if "all" in names:
        names += [entry.name for entry in REGISTRY.values() if entry.in_all]
    names += [entry.name for entry in REGISTRY.values() if set(entry.groups) & set(names)]
    groups = {group for entry in REGISTRY.values() for group in entry.groups} | {"all"}
    names = [name for name in names if name not in groups]
    return tuple(name for name in REGISTRY if name in names) + tuple(
        dict.fromkeys(name for name in names if name not in REGISTRY))


def groups() -> dict[str, tuple[str, ...]]:
    """The names ``--scores`` accepts for several scores at once, and the scores each means:
    ``all`` (every score whose entry says ``in_all``) and every group an entry names.

    Examples
    --------
    >>> groups()["calibrators"]
    ('msp', 'temp', 'vector', 'dirichlet', 'ets', 'isotonic')
    """
    names = dict.fromkeys(group for entry in REGISTRY.values() for group in entry.groups)
    return {"all": score_names(["all"]), **{group: score_names([group]) for group in names}}


def choices() -> str:
    """The choices of ``--scores`` for a message: every name, then the groups."""
    return f"{', '.join(REGISTRY)}, or {', '.join(groups())}"

