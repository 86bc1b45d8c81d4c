"""``selcal compare``: two models' dumps on the same rows, by a paired bootstrap."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from . import gate
from ..errors import SelcalError, naming_flags, said
from ..metrics.catalog import better
from .check_results import apply_holm, family_note, primary_metrics
from .load import COMPARE_RULE, Metric
from .specs import Spec, most_specific, require_matches
from .verdict import Report, Row, worsening
from ..options import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED


# --------------------------------------------------------------------------- compare
def compare(model_a, model_b, differences: dict[str, dict[str, dict]], *,
            tolerances: Sequence[tuple[Spec, float]] = (), only: Sequence[Spec] = (),
            path_a: str = "A", path_b: str = "B", confidence: float | None = None,
            resamples: int | None = None, seed: int | None = None, all_metrics: bool = False) -> Report:
    """Verdicts from :func:`selcal.bootstrap.paired_differences` (model_a/model_b: ModelResult):
    the metrics ``only``, or every one with ``all_metrics``, else the primary ones."""
    rows: list[Row] = []
    metrics = []
    # The order of the JSON: model level, then each score's metrics as evaluate lists them.
    order = {"model": list(differences.get("model", {}))}
    order.update({name: list(model_a.scores.get(name, {})) for name in model_a.scores})
    levels = [level for level in order if level in differences] + [lv for lv in differences if lv not in order]
    for level in levels:
        values = differences[level]
        keys = [k for k in order.get(level, []) if k in values] + [k for k in values if k not in order.get(level, [])]
        for key in keys:
            entry = values[key]
            if better(key) is None:
                continue
            name = key if level == "model" else f"{level}.{key}"
            metric = Metric(model_b.name, name, None if level == "model" else level, key, entry["b"], None)
            metrics.append((metric, entry))
    require_matches(only, [m for m, _ in metrics], said("only"), "the comparison")
    require_matches([s for s, _ in tolerances], [m for m, _ in metrics], said("tolerances"), "the comparison")
    primary = primary_metrics({"scores": model_a.scores})
    for metric, entry in metrics:
        if only and not any(spec.matches(metric) for spec in only):
            continue
        if not only and not all_metrics and metric.name not in primary:
            continue
        direction = better(metric.metric)
        tolerance = most_specific(tolerances, metric) or 0.0
        ci = entry["ci"]
        p_value = None
        if entry["difference"] is None or ci is None:
            status = "undefined"
        else:
            resampled = entry.get("resampled")
            if resampled is not None:
                p_value = gate.paired_pvalue(resampled if direction == "lower" else -resampled, tolerance)
            worse = ci[0] > 0 if direction == "lower" else ci[1] < 0
            improved = ci[1] < 0 if direction == "lower" else ci[0] > 0
            if worse:
                within = worsening(direction, entry["a"], entry["b"]) <= tolerance
                status = "worse, within tolerance" if within else "worse, within noise"
            else:
                status = "better" if improved else "no significant difference"
        rows.append(Row(f"{model_a.name} -> {model_b.name}", metric.name, direction, "compare", entry["a"], entry["b"],
                        entry["difference"], ci_difference=ci, tolerance=tolerance, status=status,
                        p_value=p_value))
    apply_holm(rows, confidence or DEFAULT_CONFIDENCE, "WORSE")
    clusters = getattr(model_a, "clusters", None)
    unit = (f"the same {int(np.unique(clusters).size)} images ({model_a.n_eval} evaluation pixels, resampled by "
            f"whole image)" if clusters is not None else f"the same {model_a.n_eval} evaluation rows")
    notes = [f"paired bootstrap: {resamples} resamples of {unit}, seed {seed}",
             family_note(rows, confidence or DEFAULT_CONFIDENCE, only, all_metrics)]
    if all_metrics:
        notes.append("class-wise ECE has no interval (not a mean over rows) and is not compared")
    tested = sum(1 for row in rows if row.p_value is not None)
    if resamples and tested and 1 / (resamples + 1) > gate.alpha_of(confidence or DEFAULT_CONFIDENCE) / tested:
        needed = math.ceil(tested / gate.alpha_of(confidence or DEFAULT_CONFIDENCE)) - 1
        notes.append(f"with {resamples} resamples the smallest p-value is 1/{resamples + 1}: too coarse for Holm "
                     f"over {tested} metrics, so none can fail; give {said('resamples', needed)} or more")
    warnings = [(model.name, text) for model in (model_a, model_b) for text in model.warnings]
    return Report("compare", rows, {"a": path_a, "b": path_b}, COMPARE_RULE, confidence, notes, warnings)


def _align(a, b, allow_other_data: bool = False) -> np.ndarray:
    """Indices into b's rows that put them in a's order (by id when both have ids, else by position).

    Other data (other ids, other labels) is refused, unless ``allow_other_data``: rows are then
    paired by position when the ids differ, and their labels are not compared."""
    if allow_other_data and len(a) == len(b) and (a.ids is None or b.ids is None
                                                  or not np.array_equal(np.sort(a.ids), np.sort(b.ids))):
        return np.arange(len(b))
    if a.ids is not None and b.ids is not None:
        for dump in (a, b):
            values, counts = np.unique(dump.ids, return_counts=True)
            if values.size != dump.ids.size:
                raise SelcalError(f"{dump.path}: column 'id' has duplicate values (e.g. '{values[counts > 1][0]}'); "
                                  "compare aligns rows by id, so ids must be unique")
        only_a, only_b = np.setdiff1d(a.ids, b.ids), np.setdiff1d(b.ids, a.ids)
        if only_a.size or only_b.size:
            example = f"'{only_a[0]}' only in A" if only_a.size else f"'{only_b[0]}' only in B"
            raise SelcalError(f"{b.path}: its evaluation rows are not those of {a.path} ({only_a.size} ids only in A, "
                              f"{only_b.size} only in B, e.g. {example}); compare needs the same evaluation rows "
                              f"(or give {said('allow_other_data', True)})")
        order = np.argsort(b.ids, kind="stable")
        rows = order[np.searchsorted(b.ids[order], a.ids)]
        where = lambda i: f"id '{a.ids[i]}'"  # noqa: E731
    else:
        if len(a) != len(b):
            raise SelcalError(f"{b.path}: has {len(b)} evaluation rows but {a.path} has {len(a)}; compare needs the "
                              "same rows (add an 'id' column to both files to align them by id)")
        rows = np.arange(len(b))
        where = lambda i: f"row {i}"  # noqa: E731
    mismatch = np.flatnonzero(b.labels[rows] != a.labels)
    if mismatch.size and not allow_other_data:
        i = int(mismatch[0])
        raise SelcalError(f"{b.path}: {where(i)} has label {int(b.labels[rows][i])} but {a.path} has "
                          f"{int(a.labels[i])} ({mismatch.size} labels differ): different data sets; compare needs the "
                          "same evaluation rows, in the same order or with an 'id' column (or give "
                          f"{said('allow_other_data', True)})")
    return rows


def labels_differ(a, b) -> bool:
    return len(a) != len(b) or bool(np.any(a.labels != b.labels))


def _evaluation_pair(a, b, val_a, val_b, options, allow_other_data: bool = False):
    """(val_a, eval_a, val_b, eval_b, rule) with the same evaluation rows for both, in a's order."""
    from ..pipeline.split import holdout_mask, split_rows

    fit_a, eval_a, rule_a = split_rows(a, val_a, options)
    fit_b, eval_b, rule_b = split_rows(b, val_b, options)
    if rule_a != rule_b and {rule_a, rule_b} != {"split-column", "split-names"}:
        raise SelcalError(f"{b.path}: its validation rows are chosen by '{rule_b}' but {a.path}'s by '{rule_a}'; "
                          f"give both a split column, or {said('val')} for both, so both are evaluated on the same rows")
    if rule_a == "holdout":
        # One hold-out for both: A's (seeded, by row identity), applied to B's rows aligned to A's.
        rows = _align(a, b, allow_other_data)
        mask = holdout_mask(len(a), a.ids, options.val_fraction, options.seed)
        b = b.subset(rows)
        return a.subset(mask), a.subset(~mask), b.subset(mask), b.subset(~mask), rule_a
    return fit_a, eval_a, fit_b, eval_b.subset(_align(eval_a, eval_b, allow_other_data)), rule_a


def compare_files(path_a, path_b, *, val: Sequence | None = None, options=None, label_col: str | None = None,
                  logits_col: str | None = None, ignore_label: int | None = None, resamples: int = DEFAULT_RESAMPLES,
                  seed: int = DEFAULT_SEED, confidence: float = DEFAULT_CONFIDENCE, tolerances: Sequence[tuple[Spec, float]] = (),
                  only: Sequence[Spec] = (), progress=None, pixels_per_image: int | None = None,
                  input_kind: str | None = None, ood_label: int | None = None,
                  all_metrics: bool = False, allow_other_data: bool = False) -> Report:
    """``selcal compare``: evaluate two dumps on the same rows and judge B - A with paired intervals.

    ``input_kind`` and ``ood_label`` as for ``selcal evaluate`` (``--input``, ``--ood-label``).
    ``allow_other_data``: pair the rows by position even when their labels (or ids) differ
    (refused otherwise), as long as both have as many.

    ``progress(done, total)``: paired resamples done (for a progress bar)."""
    from ..bootstrap import paired_differences
    from ..options import Options
    from ..pipeline.measure import measure_arrays
    from ..io import read_dump

    options = options or Options()
    val = list(val or [])
    if val and len(val) != 2:
        takes = "compare takes --val twice" if naming_flags() else "val takes two files"
        raise SelcalError(f"{takes} (A's, then B's) or not at all; got {len(val)}")

    def read(path):
        return read_dump(str(path), label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                         seed=options.seed, pixels_per_image=pixels_per_image,  # (segmentation folders: the draw)
                         input_kind=input_kind, ood_label=ood_label)

    a, b = read(path_a), read(path_b)
    dropped = []
    for dump in (a, b):  # a file of probabilities: the scores that need raw logits are compared for neither
        if dump.input != "logits":
            from ..api import scores_for_input

            options, more = scores_for_input(options, dump.input, dump.path)
            dropped += [name for name in more if name not in dropped]
    if a.num_classes != b.num_classes:
        raise SelcalError(f"{b.path}: has K = {b.num_classes} classes but {a.path} has K = {a.num_classes}: "
                          "different data sets cannot be compared")
    val_a, val_b = (read(val[0]), read(val[1])) if val else (None, None)
    fit_a, eval_a, fit_b, eval_b, rule = _evaluation_pair(a, b, val_a, val_b, options, allow_other_data)
    name_a, name_b = Path(str(path_a)).stem, Path(str(path_b)).stem
    if name_a == name_b:
        name_a, name_b = str(path_a), str(path_b)

    def evaluate(fit, rows, name, dump):
        return measure_arrays(rows.logits, rows.labels, None if fit is None else fit.logits,
                               None if fit is None else fit.labels, options=options, name=name, path=dump.path,
                               split=rule, extra={"input": dump.input} if dump.input != "logits" else None,
                               clusters=eval_a.images)  # pixel rows: A's images, so both resample the same ones

    model_a = evaluate(fit_a, eval_a, name_a, a)
    model_b = evaluate(fit_b, eval_b, name_b, b)
    differences = paired_differences(model_a, model_b, resamples=resamples, seed=seed, confidence=confidence,
                                     options=options, progress=progress)
    report = compare(model_a, model_b, differences, tolerances=tolerances, only=only, path_a=a.path, path_b=b.path,
                     confidence=confidence, resamples=resamples, seed=seed, all_metrics=all_metrics)
    if (eval_a.ids is None or eval_b.ids is None) and eval_a.images is None:  # (pixels: by image and position)
        report.notes.append("rows aligned by their order in the files (no 'id' column in both): row i of A is "
                            "taken to be row i of B")
    if labels_differ(eval_a, eval_b):
        report.notes.append(f"{said('allow_other_data', True)}: the two models' rows hold other labels; the comparison is not "
                            "on the same data")
    if rule == "holdout":
        report.notes.append("one random hold-out (A's) is used for both models, so both are evaluated on the same rows")
    if dropped:
        report.notes.append(f"not compared: {', '.join(dropped)} (a file holds probabilities; they need raw logits)")
    return report
