"""Are results comparable? The fingerprints of their evaluation data, compared (CONVENTIONS.md,
"Comparisons on common ground"). Pure: result objects or JSON dicts in, messages out."""

from __future__ import annotations

from ..pipeline.identity import same_data

__all__ = ["fingerprint_of", "leaderboard_warning", "other_data_message"]


def fingerprint_of(model) -> dict | None:
    """The fingerprint of a model (a :class:`~selcal.report.ModelResult` or its JSON dict)."""
    found = model.get("fingerprint") if isinstance(model, dict) else (model.extra or {}).get("fingerprint")
    return found if isinstance(found, dict) else None


def _name(model) -> str:
    return model["name"] if isinstance(model, dict) else model.name


def _describe(fp: dict) -> str:
    return f"{fp.get('rows')} rows" + (", with ids" if fp.get("ids") else ", no ids")


def leaderboard_warning(models) -> str | None:
    """One line naming the models of a leaderboard that were evaluated on other rows than the
    first model (None when every fingerprint agrees, or a result has none).

    >>> a = {"name": "a", "fingerprint": {"rows": 3, "labels": "01"}}
    >>> b = {"name": "b", "fingerprint": {"rows": 3, "labels": "02"}}
    >>> leaderboard_warning([a, a]) is None
    True
    >>> leaderboard_warning([a, b])
    'the models were not evaluated on the same rows: b differs from a (3 rows, no ids); their numbers are not comparable (give the dumps ids or the same row order, or a split column)'
    """
    models = list(models)
    if len(models) < 2:
        return None
    groups: list[tuple[dict, list[str]]] = []
    for model in models:
        fp = fingerprint_of(model)
        if fp is None:
            return None
        for known, names in groups:
            if same_data(known, fp):
                names.append(_name(model))
                break
        else:
            groups.append((fp, [_name(model)]))
    if len(groups) == 1:
        return None
    first_fp, first = groups[0]
    others = [", ".join(names) for _, names in groups[1:]]
    verb = "differs" if len(groups) == 2 and len(groups[1][1]) == 1 else "differ"
    return (f"the models were not evaluated on the same rows: {'; '.join(others)} {verb} from {', '.join(first)} "
            f"({_describe(first_fp)}); their numbers are not comparable (give the dumps ids or the same row "
            "order, or a split column)")


def other_data_message(current: dict, baseline: dict, current_path: str, baseline_path: str) -> str | None:
    """Why ``current`` was not evaluated on ``baseline``'s rows, in one line (None when it was,
    or when either result has no fingerprint: an older selcal wrote it)."""
    a, b = fingerprint_of(current), fingerprint_of(baseline)
    if same_data(a, b) is not False:
        return None
    if a.get("rows") != b.get("rows"):
        what = f"{a.get('rows')} evaluation rows against {b.get('rows')}"
    elif bool(a.get("ids")) != bool(b.get("ids")):
        what = "rows with ids against rows without" if a.get("ids") else "rows without ids against rows with"
    elif a.get("ids") != b.get("ids"):
        what = "other row ids"
    else:
        what = "the same number of rows but other labels"
    return (f"{current_path}: model '{_name(current)}' was evaluated on other data than {baseline_path}'s "
            f"'{_name(baseline)}' ({what}); judge it on the baseline's rows, or give --allow-other-data")
