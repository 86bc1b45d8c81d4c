"""The metric catalog: every fact about a metric, in one entry.

Each :class:`Metric` says how it is named for people (label, unit), which way is better
(``check`` and ``compare`` judge it by that), whether ``--bootstrap`` gives it an interval,
at which level it is reported (per score, per model) and which options change its value
(``check`` refuses to compare files made with other values of those). The terminal table,
the leaderboard, the bootstrap, ``check``, ``compare``, their Markdown and JUnit and the
HTML report all read it; none keeps its own list.

Adding a metric is one entry below plus its function: a metric of a score's top-label
confidence gives ``compute(confidence, correct, options) -> float``; the evaluation then
reports it for every score with probabilities (after ECE, RMSCE, adaptive ECE and MCE), and the
bootstrap gives it an interval by computing it again on every resample (unless the entry
says ``interval=False``).

Several keys from one computation (smooth ECE and its bandwidth σ*: one fixed-point search
gives both) are one *computation* shared by several entries: :func:`jointly` gives each
entry the same ``compute`` (returning one value per key, in the order of ``keys``) and the
same ``keys``, and every consumer computes each computation once (:func:`computations`,
:meth:`Metric.values`) and takes the keys it wants; each key's properties (label, unit,
direction, interval, ...) stay its own entry's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
import math

import numpy as np

from . import calibration, smooth

__all__ = ["Metric", "CATALOG", "add", "jointly", "get", "label", "name", "unit", "values_range", "better", "has_interval", "section",
           "model_level", "computations", "definition_options", "need_logits", "FAMILIES", "split_name", "column",
           "tested_under_the_null", "NULL_STATISTICS"]


@dataclass(frozen=True)
class Metric:
    """One metric.

    key : its JSON key (``aurc``); a family of keys ends with ``@`` (``cov@``: ``cov@0.05``).
    label : its name for people (``AURC``; a family: a format of the family's value in percent,
        ``cov@risk {}%``).
    unit : ``"pct"`` (a fraction, shown in percent in the evaluate tables) or ``"num"``.
    lower_is_better : True, False, or None (no direction: shown, never judged).
    interval : ``--bootstrap`` gives it a percentile interval.
    levels : where it is reported: ``"score"`` (in each score's dict), ``"model"`` (model level).
    section : the evaluate table's section (``"selective"``, ``"calibration"``), or None (not a row).
    options : the fields of Options that change its value (beyond the rows).
    needs_logits : it needs every class's logit (or probability) of a row, not only a confidence
        and a prediction: not available for a file of confidences.
    compute : ``(confidence, correct, options) -> float`` for a metric of a top-label confidence
        (reported for every score with probabilities); None when computed with its family
        (the selective metrics, from the one risk-coverage primitive). When ``keys`` names
        several keys, it returns a tuple of their values, in that order.
    resample : the same for the bootstrap's resamples when a cheaper computation is precise enough
        for an interval (smooth ECE: a coarser grid); None: ``compute``.
    resample_counts : a vectorised form of ``resample`` over a block of resamples:
        ``(confidence, correct, options)`` of the rows, once, returns a function of ``counts`` (B x N,
        row i counted ``counts[j, i]`` times in resample j) giving one array of B values per key, in
        the order of ``keys``; each equals ``resample`` on the repeated rows (to the tolerance its
        entry states). None: ``resample`` is called once per resample.
    resample_counts_by_row : the function ``resample_counts`` returns also takes ``by_row=``, the counts
        transposed (N x B, float64, C-contiguous), so that a caller holding them passes them once for
        every such computation (smooth ECE); it says so here, not through its signature.
    keys : the keys one call of ``compute`` gives, in order (set by :func:`jointly` on every entry
        of a shared computation); empty: the entry's own key only.
    null : (metric, statistic) for a summary of a metric's distribution under perfect calibration
        (``--calibration-test``: ``ece_floor`` is ``("ece", "floor")``); None otherwise.
    values_range : (lowest, highest) value it can take (a fraction's: [0, 1]): a bound of ``check``
        outside it can never fail or never pass, and is refused.
    """

    key: str
    label: str
    unit: str = "pct"
    lower_is_better: bool | None = True
    interval: bool = True
    levels: tuple[str, ...] = ("score",)
    section: str | None = None
    options: tuple[str, ...] = ()
    needs_logits: bool = False
    compute: Callable[[np.ndarray, np.ndarray, object], float] | None = None
    resample: Callable[[np.ndarray, np.ndarray, object], float] | None = None
    resample_counts: Callable | None = None
    resample_counts_by_row: bool = False
    keys: tuple[str, ...] = ()
    null: tuple[str, str] | None = None
    values_range: tuple[float, float] = (0.0, 1.0)

    @property
    def family(self) -> bool:
        return self.key.endswith("@")

    @property
    def gives(self) -> tuple[str, ...]:
        """The keys one call of its ``compute`` gives (its own key, unless computed jointly)."""
        return self.keys or (self.key,)

    def values(self, confidence, correct, options, *, resample: bool = False) -> dict:
        """``{key: value}`` for every key its computation gives, from one call of ``compute``
        (of ``resample``, when given and ``resample`` is true: a bootstrap resample).

        Examples
        --------
        >>> import numpy as np
        >>> q, c = np.array([0.9, 0.6]), np.array([True, False])
        >>> sorted(CATALOG["smece"].values(q, c, None))
        ['smece', 'smece_sigma']
        """
        function = (self.resample or self.compute) if resample else self.compute
        value = function(confidence, correct, options)
        return dict(zip(self.keys, value, strict=True)) if self.keys else {self.key: value}


def _aece(confidence, correct, options) -> float:
    if options.aece_estimator == "mbls":
        return calibration.mbls_adaptive_calibration_error(confidence, correct, options.bins)
    return calibration.adaptive_calibration_error(confidence, correct, options.bins)


def _smooth(confidence, correct, options) -> tuple[float, float]:
    """smooth ECE and its σ* (the keys ``smece``, ``smece_sigma``), from one fixed-point search."""
    fixed_point = smooth.smooth_ece(confidence, correct)
    return fixed_point.value, fixed_point.sigma


# smooth ECE on a bootstrap resample: a coarser grid (within 1e-4 of the value: test_smooth), σ* to 1e-10
SMOOTH_RESAMPLE = {"points_per_sigma": 32, "xtol": 1e-10, "max_grid": 1 << 12}


def _smooth_resample(confidence, correct, options) -> tuple[float, float]:
    """The same on a bootstrap resample, on a coarser grid (:data:`SMOOTH_RESAMPLE`)."""
    fixed_point = smooth.smooth_ece(confidence, correct, **SMOOTH_RESAMPLE)
    return fixed_point.value, fixed_point.sigma


def _smooth_resamples(confidence, correct, options):
    """:func:`_smooth_resample` of a block of resamples at once (σ* within 2e-10 of it, smECE closer)."""
    return smooth.SmoothEceOfCounts(confidence, correct, **SMOOTH_RESAMPLE)


CATALOG: dict[str, Metric] = {}

# The calibration test's summaries of a metric's null distribution (CONVENTIONS.md, "Calibration under the
# null"): key suffix, label, unit and direction. The p-value is judged (check --min msp.ece_p=0.05: higher is
# more consistent with calibration); the floor and the 95th percentile are shown, never judged.
NULL_STATISTICS = (("floor", "{} floor", "pct", None), ("null_q95", "{} null 95%", "pct", None),
                   ("p", "{} p-value", "num", False))


def under_the_null(metric: Metric) -> tuple[Metric, ...]:
    """The entries of the calibration test's keys of ``metric`` (``ece_floor``, ``ece_null_q95``, ``ece_p``):
    no interval, shown only when present (``evaluate --calibration-test M``)."""
    return tuple(Metric(f"{metric.key}_{suffix}", label.format(metric.label), unit=unit, lower_is_better=better_,
                        interval=False, section=metric.section, options=metric.options, null=(metric.key, suffix))
                 for suffix, label, unit, better_ in NULL_STATISTICS)


def add(metric: Metric) -> Metric:
    """Add a metric to the catalog (its order is the order of the table's rows and the JSON's keys).

    The entries of a joint computation (:func:`jointly`) are added in the order of their keys,
    the first one first (it stands for the computation in :func:`computations`).
    """
    if metric.key in CATALOG:
        raise ValueError(f"metric {metric.key!r} is already in the catalog")
    if metric.resample_counts_by_row and metric.resample_counts is None:
        raise ValueError(f"metric {metric.key!r}: resample_counts_by_row without resample_counts")
    if metric.keys:
        head = CATALOG.get(metric.keys[0]) if metric.key != metric.keys[0] else metric
        if metric.key not in metric.keys or head is None or (head.keys, head.compute) != (metric.keys, metric.compute):
            raise ValueError(f"metric {metric.key!r}: the entries of a joint computation {metric.keys} are added "
                             "together, in order (selcal.metrics.catalog.jointly)")
    CATALOG[metric.key] = metric
    return metric


def jointly(*metrics: Metric, compute: Callable, resample: Callable | None = None,
            resample_counts: Callable | None = None, resample_counts_by_row: bool = False) -> tuple[Metric, ...]:
    """The entries of several keys given by one computation: each gets ``compute`` (returning a
    tuple of their values, in the order of ``metrics``), ``resample``, ``resample_counts``
    (``resample_counts_by_row``) and the keys.

    Examples
    --------
    >>> a, b = jointly(Metric("lo", "low"), Metric("hi", "high"), compute=lambda q, y, o: (q.min(), q.max()))
    >>> b.gives, b.compute is a.compute
    (('lo', 'hi'), True)
    """
    keys = tuple(m.key for m in metrics)
    return tuple(replace(m, compute=compute, resample=resample, resample_counts=resample_counts,
                         resample_counts_by_row=resample_counts_by_row, keys=keys) for m in metrics)


for _metric in (
    # selective classification (CONVENTIONS.md), computed together from the risk-coverage curve
    Metric("aurc", "AURC", section="selective", options=("aurc_estimator",)),
    Metric("eaurc", "E-AURC", section="selective", options=("aurc_estimator",)),
    Metric("augrc", "AUGRC", section="selective"),
    Metric("auroc", "AUROC", lower_is_better=False, section="selective"),
    Metric("fpr95", "FPR@95%TPR", section="selective"),
    Metric("cov@", "cov@risk {}%", lower_is_better=False, section="selective"),  # a key per --risks
    Metric("risk@", "risk@cov {}%", section="selective"),  # a key per --coverages
    # of the predictions
    Metric("accuracy", "accuracy", lower_is_better=False, levels=("model", "score")),
    Metric("error", "error", levels=("model",)),
    # calibration of a top-label confidence
    _ece := Metric("ece", "ECE", section="calibration", options=("bins",),
                   compute=lambda q, y, o: calibration.expected_calibration_error(q, y, o.bins)),
    *under_the_null(_ece),
    Metric("rmsce", "RMS-CE", section="calibration", options=("bins",),
           compute=lambda q, y, o: calibration.rms_calibration_error(q, y, o.bins)),
    _aece_entry := Metric("aece", "adaptive ECE", section="calibration", options=("bins", "aece_estimator"),
                          compute=_aece),
    *under_the_null(_aece_entry),
    Metric("mce", "MCE", section="calibration", options=("bins",),
           compute=lambda q, y, o: calibration.maximum_calibration_error(q, y, o.bins)),
    # smooth ECE and its bandwidth σ*: one fixed-point search gives both
    *(_smooth_entries := jointly(
        Metric("smece", "smooth ECE", section="calibration"),
        Metric("smece_sigma", "smooth ECE σ*", unit="num", lower_is_better=None, section="calibration",
               values_range=(0.0, math.inf)),
        compute=_smooth, resample=_smooth_resample, resample_counts=_smooth_resamples, resample_counts_by_row=True)),
    *under_the_null(_smooth_entries[0]),
    # of the probabilities: the model's own, and those of a score that has its own
    Metric("nll", "NLL", unit="num", levels=("model", "score"), section="calibration", needs_logits=True,
           values_range=(0.0, math.inf)),
    Metric("brier", "Brier", unit="num", levels=("model", "score"), section="calibration", needs_logits=True,
           values_range=(0.0, 2.0)),
    Metric("cece", "class-wise ECE", interval=False, levels=("model", "score"), section="calibration",
           options=("bins",), needs_logits=True),
    # of the predictions, from every logit of a row
    Metric("top5_accuracy", "top-5 accuracy", lower_is_better=None, interval=False, levels=("model",),
           needs_logits=True),
    # a fitted value that gets an interval when refitted (--bootstrap-refit)
    Metric("temperature", "temperature T", unit="num", lower_is_better=None, interval=False,
           values_range=(0.0, math.inf)),
):
    add(_metric)
del _metric, _ece, _aece_entry, _smooth_entries

FAMILIES = tuple(k for k in CATALOG if k.endswith("@"))


def get(key: str) -> Metric | None:
    """The entry of a metric key (``cov@0.05`` is the family ``cov@``), or None."""
    if key in CATALOG:
        return CATALOG[key]
    head, at, _ = key.partition("@")
    return CATALOG.get(head + at) if at else None


def _split(key: str) -> tuple[str | None, str]:
    """(score, metric) of ``msp.aurc``; (None, key) of ``aurc`` (the dot of ``cov@0.05`` is no score's); a
    group's metric (``shifted/msp.aurc``, ``shifted/accuracy``) keeps its group with the score."""
    group, slash, key = key.rpartition("/")
    score, dot, metric = key.partition(".")
    if dot and "@" not in score:
        return group + slash + score, metric
    return (group + slash, key) if slash else (None, key)


def split_name(text: str) -> tuple[str | None, str]:
    """(score, key) of a metric named in any of its spellings: ``msp.aurc`` (the JSON's, ``check``'s),
    ``aurc_msp`` (the leaderboard CSV's column, :func:`column`), a key alone (``aurc``: score None);
    a family's value also in percent, as the tables show it (``msp.cov@5%`` is ``msp.cov@0.05``).
    The score is not looked up (a column of the file may be one); an unknown key comes back as is.

    Examples
    --------
    >>> split_name("msp.aurc"), split_name("aurc_max_logit"), split_name("smece_sigma_temp")
    (('msp', 'aurc'), ('max_logit', 'aurc'), ('temp', 'smece_sigma'))
    >>> split_name("cov@5%_msp"), split_name("msp.risk@0.5"), split_name("top5_accuracy")
    (('msp', 'cov@0.05'), ('msp', 'risk@0.5'), (None, 'top5_accuracy'))
    """
    text = text.strip()
    score, dot, key = text.partition(".")
    if dot and "@" not in score:  # (the dot of cov@0.05 is no score's)
        return score, _family_value(key)
    if _is_key(_family_value(text)):
        return None, _family_value(text)
    for key in sorted(CATALOG, key=len, reverse=True):  # the longest key first: smece_sigma before smece
        if CATALOG[key].family:
            head, _, rest = text.partition("_") if text.startswith(key) else ("", "", "")
            if rest and _is_key(_family_value(head)):
                return rest, _family_value(head)
        elif text.startswith(key + "_") and len(text) > len(key) + 1:
            return text[len(key) + 1:], key
    return None, text


def _is_key(key: str) -> bool:
    """A key of the catalog, or a family's with a number after its ``@`` (``cov@0.05``)."""
    metric = get(key)
    if metric is None or not metric.family:
        return metric is not None
    try:
        return math.isfinite(float(key[len(metric.key):]))
    except ValueError:
        return False


def _family_value(key: str) -> str:
    """``cov@5%`` -> ``cov@0.05`` (a family's value as its keys write it); any other key as is."""
    head, at, value = key.partition("@")
    if not at or not value.endswith("%"):
        return key
    try:
        return f"{head}@{float(value[:-1]) / 100:g}"
    except ValueError:
        return key


def column(score: str, key: str) -> str:
    """The leaderboard CSV's column of a score's metric: ``aurc_msp``, ``ece_temp``."""
    return f"{key}_{score}"


def name(key: str) -> str:
    """The name of a metric key for people, e.g. ``cov@0.05`` -> ``cov@risk 5%``; a score-qualified
    key (``msp.aurc``) gets its score in front (``msp AURC``); an unknown key is its own name.

    Examples
    --------
    >>> name("aurc"), name("risk@0.5"), name("max_logit.cov@0.01")
    ('AURC', 'risk@cov 50%', 'max_logit cov@risk 1%')
    >>> name("shifted/msp.aurc"), name("shifted/accuracy")
    ('shifted/msp AURC', 'shifted/accuracy')
    """
    score, key = _split(key)
    if score is not None:
        return f"{score}{'' if score.endswith('/') else ' '}{name(key)}"
    metric = get(key)
    if metric is None:
        return key
    if metric.family:
        return metric.label.format(f"{100 * float(key[len(metric.key):]):g}")
    return metric.label


def unit(key: str) -> str:
    """``"pct"`` (a fraction, shown in percent in the evaluate tables) or ``"num"``."""
    metric = get(_split(key)[1])
    return metric.unit if metric is not None else "num"


def values_range(key: str) -> tuple[float, float]:
    """(lowest, highest) value a metric key can take (``(-inf, inf)`` for a key not in the catalog)."""
    metric = get(_split(key)[1])
    return metric.values_range if metric is not None else (-math.inf, math.inf)


def label(key: str) -> str:
    """Name and unit for a table row of the evaluate tables: ``AURC (%)``, ``NLL``."""
    return name(key) + (" (%)" if unit(key) == "pct" else "")


def better(key: str) -> str | None:
    """``"lower"`` or ``"higher"`` (which direction is better) for a metric key; None if it has none.

    Examples
    --------
    >>> better("aurc"), better("cov@0.05"), better("risk@0.9"), better("temperature")
    ('lower', 'higher', 'lower', None)
    """
    metric = get(key)
    if metric is None or metric.lower_is_better is None:
        return None
    return "lower" if metric.lower_is_better else "higher"


def has_interval(key: str) -> bool:
    """Whether ``--bootstrap`` gives the metric an interval (the temperature: only when refitted)."""
    metric = get(key)
    return metric is not None and metric.interval


def section(name_: str) -> list[str]:
    """The keys of a section of the evaluate table, in order (families as their prefix)."""
    return [k for k, m in CATALOG.items() if m.section == name_]


def model_level(judged: bool = True) -> tuple[str, ...]:
    """The model-level metrics (with a direction, when ``judged``)."""
    return tuple(k for k, m in CATALOG.items() if "model" in m.levels and (not judged or m.lower_is_better is not None))


def computations() -> list[Metric]:
    """The computations of a score's top-label confidence (ECE, adaptive ECE, MCE, smooth ECE and
    its σ*, ...): one entry per computation (the first of a joint one's), whose
    :meth:`Metric.values` gives every key it computes.

    Examples
    --------
    >>> [m.gives for m in computations()]
    [('ece',), ('rmsce',), ('aece',), ('mce',), ('smece', 'smece_sigma')]
    """
    return [m for m in CATALOG.values() if m.compute is not None and m.key == m.gives[0]]


def tested_under_the_null() -> tuple[str, ...]:
    """The metrics whose distribution under perfect calibration ``--calibration-test`` reports.

    Examples
    --------
    >>> tested_under_the_null()
    ('ece', 'aece', 'smece')
    """
    return tuple(dict.fromkeys(m.null[0] for m in CATALOG.values() if m.null is not None))


def definition_options() -> tuple[str, ...]:
    """The options that change what a metric means: results made with other values are not comparable."""
    return tuple(dict.fromkeys(o for m in CATALOG.values() for o in m.options))


def need_logits() -> tuple[str, ...]:
    """The model-level metrics that need the logits (listed as not available for a file of confidences).

    Examples
    --------
    >>> need_logits()
    ('nll', 'brier', 'cece', 'top5_accuracy')
    """
    return tuple(k for k, m in CATALOG.items() if m.needs_logits and "model" in m.levels)
