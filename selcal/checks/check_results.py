"""``selcal check``: a result JSON against a baseline and bounds."""

from __future__ import annotations

from typing import Any, Sequence

from . import gate
from ..errors import SelcalError, naming_flags, said
from ..metrics import catalog
from ..metrics.catalog import better
from .load import CHECK_RULE, Metric, metrics_of
from .specs import Spec, most_specific, require_matches
from .verdict import Report, Row, worsening
from ..options import DEFAULT_CONFIDENCE


# ----------------------------------------------------------------------------- check
def _judge(metric: Metric, base: Metric, tolerance: float | None, bootstrapped: bool) -> tuple[str, bool]:
    """The rule of the module docstring for one metric present in both files.

    ``tolerance`` None: no --tolerance names the metric (0 applies); ``bootstrapped``: both
    files carry intervals, so a metric without an interval in either is judged only when a
    tolerance names it.
    """
    if base.value is None or metric.value is None:
        return ("undefined in both" if base.value is None and metric.value is None else "undefined in one"), False
    direction = better(metric.metric)
    worse_by = worsening(direction, base.value, metric.value)
    if worse_by < 0:
        return "better", False
    if worse_by == 0:
        return "same", False
    if worse_by <= (tolerance or 0.0):
        return "worse, within tolerance", False
    if base.ci is not None and metric.ci is not None:
        return "worse, within noise", False  # until Holm's procedure over every judged metric says otherwise
    if bootstrapped and tolerance is None:
        return "worse, no interval: give a --tolerance", False
    return "REGRESSION", True


_SAME_DEFINITIONS = catalog.definition_options()  # options that change what a metric means


def check(current: dict[str, Any], baseline: dict[str, Any] | None = None, *,
          tolerances: Sequence[tuple[Spec, float]] = (), maxima: Sequence[tuple[Spec, float]] = (),
          minima: Sequence[tuple[Spec, float]] = (), only: Sequence[Spec] = (),
          current_path: str = "CURRENT", baseline_path: str = "BASELINE", all_metrics: bool = False,
          allow_other_data: bool = False) -> Report:
    """Judge a result (loaded with :func:`load_result`) against a baseline and/or bounds.

    Against a baseline, the judged metrics are ``only`` when given, every metric with
    ``all_metrics``, else the primary ones (:func:`primary_metrics`) and those a ``--tolerance``
    names (not ``*``). ``allow_other_data``
    judges a baseline evaluated on other rows (refused otherwise)."""
    if baseline is None and not maxima and not minima:
        raise SelcalError(f"nothing to check: give {_baseline_said()} and/or {said('maxima')}/{said('minima')} bounds")
    models = {m["name"]: m for m in current["models"]}
    current_metrics = [m for model in current["models"] for m in metrics_of(model, groups=True).values()]
    require_matches([s for s, _ in maxima], current_metrics, said("maxima"), current_path)
    require_matches([s for s, _ in minima], current_metrics, said("minima"), current_path)
    require_matches(only, current_metrics, said("only"), current_path)
    if not baseline and tolerances:
        raise SelcalError(f"{said('tolerances')} needs {_baseline_said()} to compare against")

    def wanted(metric: Metric, primary: tuple[str, ...]) -> bool:
        if only:
            return any(spec.matches(metric) for spec in only)
        named = any(spec.metric is not None and spec.matches(metric) for spec, _ in tolerances)
        return all_metrics or named or metric.name in primary

    rows: list[Row] = []
    notes: list[str] = []
    confidence = None
    if baseline is not None:
        require_matches([s for s, _ in tolerances], current_metrics, said("tolerances"), current_path)
        pairs = _pairs(current, baseline, current_path, baseline_path)
        _check_same_data(pairs, current, baseline, current_path, baseline_path, allow_other_data, notes)
        renamed = [f"{b['name']} -> {m['name']}" for b, m in pairs if b["name"] != m["name"]]
        if renamed:
            notes.append(f"one model in each file, compared whatever its name: {renamed[0]}")
        levels = {path: (data.get("bootstrap") or {}).get("confidence")
                  for path, data in ((current_path, current), (baseline_path, baseline))}
        without = [path for path, level in levels.items() if level is None]
        if without:
            notes.append(f"no bootstrap intervals in {' and '.join(without)}: any worsening beyond the tolerance "
                         f"counts (evaluate with {said('bootstrap', 1000)} to discount noise)")
        elif levels[current_path] != levels[baseline_path]:
            notes.append(f"the intervals have different levels ({100 * levels[current_path]:g}% current, "
                         f"{100 * levels[baseline_path]:g}% baseline)")
        confidence = levels[current_path] or levels[baseline_path]
        groups = any(spec.group is not None for spec in only)  # a group's metrics: judged when --metric names them
        for base_model, model in pairs:
            ours = metrics_of(model, groups=groups)
            primary = primary_metrics(base_model)
            for name, base in metrics_of(base_model, groups=groups).items():
                if name not in ours:
                    raise SelcalError(
                        f"{current_path}: model '{model['name']}' has no {name}, which {baseline_path} has; "
                        f"evaluate with the same {'/'.join(map(said, ('scores', 'risks', 'coverages')))} as the "
                        "baseline, or regenerate it")
                metric = ours[name]
                if not wanted(metric, primary):
                    continue
                tolerance = most_specific(tolerances, metric)
                status, failed = _judge(metric, base, tolerance, bootstrapped=not without)
                difference = None if metric.value is None or base.value is None else metric.value - base.value
                p_value = None
                if base.ci is not None and metric.ci is not None and None not in (base.value, metric.value):
                    p_value = gate.interval_pvalue(worsening(better(metric.metric), base.value, metric.value),
                                                   metric.ci, base.ci, confidence or DEFAULT_CONFIDENCE, tolerance or 0.0)
                rows.append(Row(model["name"], name, better(metric.metric), "baseline", base.value, metric.value,
                                difference, ci_reference=base.ci, ci_value=metric.ci, tolerance=tolerance or 0.0,
                                status=status, failed=failed, p_value=p_value))
        apply_holm(rows, confidence or DEFAULT_CONFIDENCE, "REGRESSION")
        notes.append(family_note(rows, confidence or DEFAULT_CONFIDENCE, only, all_metrics))
        unmatched = [n for n in models if n not in {m["name"] for _, m in pairs}]
        if unmatched:
            notes.append(f"not in the baseline, only bounds checked: {', '.join(unmatched)}")
    for kind, bounds in (("max", maxima), ("min", minima)):
        for spec, bound in bounds:
            for metric in current_metrics:
                if not spec.matches(metric):
                    continue
                if metric.value is None:
                    status, failed = "undefined: bound not shown", True
                else:
                    failed = metric.value > bound if kind == "max" else metric.value < bound
                    status = ("above max" if kind == "max" else "below min") if failed else "within bound"
                rows.append(Row(metric.model, metric.name, better(metric.metric), kind, bound, metric.value,
                                None if metric.value is None else metric.value - bound, ci_value=metric.ci,
                                status=status, failed=failed))
    sources = {"current": current_path}
    if baseline is not None:
        sources["baseline"] = baseline_path
    warnings = [(model["name"], str(text)) for model in current["models"]
                for text in (model.get("warnings") if isinstance(model.get("warnings"), list) else [])]
    return Report("check", rows, sources, CHECK_RULE, confidence, notes, warnings)


def _baseline_said() -> str:
    """The baseline, in its caller's words: ``--baseline BASELINE.json`` on the command line, ``baseline`` (a
    result :func:`~selcal.checks.load_result` read) from Python."""
    return said("baseline", metavar="BASELINE.json") if naming_flags() else said("baseline")


def _pairs(current, baseline, current_path, baseline_path) -> list[tuple[dict, dict]]:
    """(baseline model, current model) pairs: by name, or the only model of each file."""
    if len(current["models"]) == 1 and len(baseline["models"]) == 1:
        return [(baseline["models"][0], current["models"][0])]
    models = {m["name"]: m for m in current["models"]}
    for base_model in baseline["models"]:
        if base_model["name"] not in models:
            raise SelcalError(
                f"{current_path}: has no model '{base_model['name']}', which {baseline_path} has "
                f"(current models: {', '.join(sorted(models))}); evaluate the same files, or regenerate the baseline")
    return [(base_model, models[base_model["name"]]) for base_model in baseline["models"]]


def primary_metrics(model: dict[str, Any]) -> tuple[str, ...]:
    """The metrics the gate judges by default: accuracy, the AURC of the first score evaluated
    and the ECE of the first score that has one (usually the same, ``msp``).

    >>> primary_metrics({"scores": {"max_logit": {"aurc": 0.1}, "msp": {"aurc": 0.1, "ece": 0.02}}})
    ('accuracy', 'max_logit.aurc', 'msp.ece')
    """
    scores = [name for name, values in model["scores"].items() if isinstance(values, dict)]
    out = ["accuracy"]
    out += [f"{name}.aurc" for name in scores if "aurc" in model["scores"][name]][:1]
    out += [f"{name}.ece" for name in scores if "ece" in model["scores"][name]][:1]
    return tuple(out)


def apply_holm(rows: list[Row], confidence: float, failed_status: str) -> None:
    """Holm's procedure over the rows that have a p-value: a rejected row that is worse by more
    than its tolerance fails (``failed_status``)."""
    tested = [row for row in rows if row.p_value is not None]
    for row, rejected in zip(tested, gate.holm([row.p_value for row in tested], gate.alpha_of(confidence))):
        if rejected and row.value is not None and row.reference is not None \
                and worsening(row.better, row.reference, row.value) > (row.tolerance or 0.0):
            row.status, row.failed = failed_status, True


def family_note(rows: list[Row], confidence: float, only, all_metrics: bool) -> str:
    chosen = (said("only") if only else said("all_metrics", True) if all_metrics else
              f"the primary metrics ({said('only')} or {said('all_metrics', True)} for others)")
    tested = sum(1 for row in rows if row.p_value is not None)
    if not tested:
        return f"judged: {chosen}"
    return (f"judged: {chosen}; a regression must be significant after Holm's correction over the "
            f"{tested} tested metric{'s' if tested != 1 else ''}: at most {100 * gate.alpha_of(confidence):g}% "
            "chance that a model that is not worse fails")


def _check_same_data(pairs, current, baseline, current_path, baseline_path, allow_other_data=False,
                     notes=None) -> None:
    """Refuse (SelcalError) a baseline of other data or other metric definitions."""
    from .common_ground import other_data_message

    for base_model, model in pairs:
        other = other_data_message(model, base_model, current_path, baseline_path)
        if other and not allow_other_data:
            raise SelcalError(other)
        if other:
            notes.append(f"{said('allow_other_data', True)}: '{model['name']}' is judged against a baseline evaluated "
                         "on other data")
            continue
        for key in ("num_classes", "n_eval", "split"):
            if key in base_model and key in model and base_model[key] != model[key] and not allow_other_data:
                raise SelcalError(
                    f"{current_path}: model '{model['name']}' has {key} = {model[key]!r} but {baseline_path} has "
                    f"{base_model[key]!r}: these are different data sets; evaluate the same dump or regenerate the baseline")
    options, base_options = current.get("options") or {}, baseline.get("options") or {}
    for key in _SAME_DEFINITIONS:
        if key in options and key in base_options and options[key] != base_options[key]:
            raise SelcalError(f"{current_path}: was evaluated with {key} = {options[key]!r} but {baseline_path} with "
                              f"{base_options[key]!r}; the metrics differ in meaning: use the baseline's options")
