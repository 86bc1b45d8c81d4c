"""Are results comparable? The fingerprints of their evaluation data, compared (CONVENTIONS.md,
"Comparisons on common ground"). Pure: result objects or JSON dicts in, messages out."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import said
from ..pipeline.identity import same_data

__all__ = ["Board", "board_warning", "boards", "describe_names", "fingerprint_of", "leaderboard_warning", "name_pattern",
           "other_data_message", "split_line"]


def fingerprint_of(model) -> dict | None:
    """The fingerprint of a model (a :class:`~selcal.report.ModelResult` or its JSON dict)."""
    found = model.get("fingerprint") if isinstance(model, dict) else (model.extra or {}).get("fingerprint")
    return found if isinstance(found, dict) else None


def _name(model) -> str:
    return model["name"] if isinstance(model, dict) else model.name


def _describe(fp: dict) -> str:
    return f"{fp.get('rows')} rows" + (", with ids" if fp.get("ids") else ", no ids")


_NATURAL = "/_-."  # where a model name breaks into parts


def name_pattern(names: list[str]) -> str | None:
    """The part of ``names`` they all share, the rest a ``*``: ``calpaper_cifar10_*/test``; None when
    they share no first part (cut at a natural point, after ``/ _ - .``).

    >>> name_pattern(["calpaper_cifar10_vgg11/test", "calpaper_cifar10_resnet18/test"])
    'calpaper_cifar10_*/test'
    >>> name_pattern(["wasscal_a", "calpaper_b"]) is None
    True
    """
    import os

    head = os.path.commonprefix(names)
    head = head[: max((i + 1 for i, c in enumerate(head) if c in _NATURAL), default=0)]
    rest = [name[len(head):] for name in names]
    tail = os.path.commonprefix([name[::-1] for name in rest])[::-1]
    tail = tail[min((i for i, c in enumerate(tail) if c in _NATURAL), default=len(tail)):]
    if "(" in tail or ")" in tail:  # ("m (3 choices)", "m (4 choices)"): no half of a bracket
        tail = ""
    if not head or head.count("(") != head.count(")") or any(len(name) <= len(tail) for name in rest):
        return None
    return f"{head}*{tail}"


def describe_names(names: list[str], of: int | None = None) -> str:
    """A set of models as a warning names it: up to three by name; more by their count and the
    pattern their names share (:func:`name_pattern`), else the first two and how many more.
    ``of``: the models in all (every one of them: "all 55 models").

    >>> describe_names(["a", "b"]), describe_names(["m_1", "m_2", "m_3", "m_4"]), describe_names(list("wxyz"), 4)
    ('a and b', '4 models (m_*)', 'all 4 models')
    """
    if len(names) <= 3:
        return " and ".join(names) if len(names) < 3 else f"{names[0]}, {names[1]} and {names[2]}"
    if of is not None and len(names) == of:
        return f"all {len(names)} models"
    pattern = name_pattern(names)
    return f"{len(names)} models ({pattern if pattern else f'{names[0]}, {names[1]} and {len(names) - 2} more'})"


def _num_classes(model):
    return model.get("num_classes") if isinstance(model, dict) else model.num_classes


def _path(model) -> str:
    return str(model.get("path") if isinstance(model, dict) else model.path)


def _log_task(model) -> tuple[str, str] | None:
    """(language model, task) of a model read from an lm-evaluation-harness log, else None."""
    import os

    from ..io.lmeval import LOG_NAME

    match = LOG_NAME.match(os.path.basename(_path(model)))
    if match is None:
        return None
    folder, name = os.path.dirname(_path(model)), _name(model)
    own = os.path.basename(folder) + "/"  # the name is "<model folder>/<task>[ (k choices)]"
    return folder, name[len(own):] if name.startswith(own) else match.group(1)


# what tells the groups apart, tried in order: (words before the value, the value of a model)
_PROPERTIES = (("with K =", _num_classes), ("of", lambda m: f"{fingerprint_of(m).get('rows'):,} rows"))


def _grouped(models) -> tuple[list[tuple[dict, list]], tuple | None]:
    """The models grouped by the rows they were evaluated on (equal fingerprints; the groups and
    their models in the order the models come) and what tells the groups apart: ``("task",
    names)`` for the tasks of lm-evaluation-harness logs, ``(words, values)`` for the first of
    :data:`_PROPERTIES` that is one value per group and differs between groups, else None. No
    groups (``[]``) when the models are one: fewer than two, a result without a fingerprint (an
    older selcal wrote it), the same rows, or one language model's tasks (each task's log holds
    other questions: a board of them is what was asked for). The one rule of the rows warning
    (:func:`leaderboard_warning`) and of the boards (:func:`boards`)."""
    models = list(models)
    if len(models) < 2:
        return [], None
    groups: list[tuple[dict, list]] = []
    for model in models:
        fp = fingerprint_of(model)
        if fp is None:
            return [], None
        for known, members in groups:
            if same_data(known, fp):
                members.append(model)
                break
        else:
            groups.append((fp, [model]))
    if len(groups) == 1:
        return [], None
    tasks = [_log_task(m) for m in models]
    if all(tasks):
        if len({lm for lm, _ in tasks}) == 1:
            return [], None  # one language model's tasks: a board per task is what was asked for
        names = [list(dict.fromkeys(_log_task(m)[1] for m in members)) for _, members in groups]
        if all(len(n) == 1 for n in names) and len({n[0] for n in names}) == len(groups):
            return groups, ("task", [n[0] for n in names])
    for words, value in _PROPERTIES:
        values = [{str(value(m)) for m in members} for _, members in groups]
        if all(len(v) == 1 for v in values) and len({next(iter(v)) for v in values}) == len(groups) \
                and None not in {next(iter(v)) for v in values} and "None" not in {next(iter(v)) for v in values}:
            return groups, (words, [next(iter(v)) for v in values])
    return groups, None  # the same K and row count: the same data set, in another order or relabelled


def leaderboard_warning(models) -> str | None:
    """One line saying that the models of a leaderboard were not all evaluated on the same rows
    (None when every fingerprint agrees, or a result has none), the models grouped by their rows
    and each group named by what its models share and the others do not (K, the number of
    rows, the task of an lm-evaluation-harness log), e.g. "2 groups: 20 models with K = 100
    (wasscal_cifar100_*/test) and 35 with K = 10 (...)". A board of one language model's tasks
    (each task's log holds other questions) is what was asked for: no warning. The groups are
    :func:`boards`' (``evaluate`` shows a board per group instead of this warning).

    >>> a = {"name": "a", "num_classes": 3, "fingerprint": {"rows": 3, "labels": "01"}}
    >>> b = {"name": "b", "num_classes": 3, "fingerprint": {"rows": 3, "labels": "02"}}
    >>> leaderboard_warning([a, a]) is None
    True
    >>> leaderboard_warning([a, b])
    'the models were not evaluated on the same rows: 2 groups, a (3 rows, no ids) and b (3 rows, no ids); their numbers are comparable within a group only (give the dumps ids or the same row order, or a split column)'
    """
    groups, apart = _grouped(models)
    if not groups:
        return None
    if apart is not None and apart[0] == "task":
        names = apart[1]
        shown = names[:6]
        listed = ", ".join(shown[:-1]) + " and " + shown[-1] if len(names) <= 6 else \
            ", ".join(shown) + f" and {len(names) - 6} more"
        return (f"the language models were evaluated on {len(groups)} tasks ({listed}), each on its own "
                "questions: compare them within a task")
    if apart is not None:
        words, shared = apart
        described = []
        for index, ((_, members), value) in enumerate(zip(groups, shared)):
            names = [_name(m) for m in members]
            who = describe_names(names) if len(names) <= 3 else \
                (f"{len(names)} models" if index == 0 else str(len(names)))
            pattern = name_pattern(names) if len(names) > 3 else None
            described.append(f"{who} {words} {value}" + (f" ({pattern})" if pattern else ""))
        hint = ("they hold different data sets: give each its own board" if words == "with K ="
                else "evaluate every model on the same rows")
    else:  # the same K and row count: the same data set, in another order or relabelled
        described = []
        for fp, members in groups:
            who, what = describe_names([_name(m) for m in members]), _describe(fp) + (" each" if len(members) > 1 else "")
            described.append(f"{who[:-1]}; {what})" if who.endswith(")") else f"{who} ({what})")
        hint = "give the dumps ids or the same row order, or a split column"
    listed = ", ".join(described[:-1]) + " and " + described[-1]
    return (f"the models were not evaluated on the same rows: {len(groups)} groups, {listed}; their numbers are "
            f"comparable within a group only ({hint})")


class Board(NamedTuple):
    """A group of models evaluated on the same rows: its ``label`` (what tells it from the other
    groups: ``K = 10``, ``6,000 rows``, ``task arc_easy``), its ``heading`` (one line: ``K = 10: 35
    models on the same 10,000 rows``) and its ``models`` (in the order given)."""

    label: str
    heading: str
    models: list


def boards(models) -> list[Board]:
    """The leaderboards the models make: one per group of models evaluated on the same rows
    (:func:`_grouped`, the groups of the rows warning, in the order the models come) when the
    groups differ in K, in their number of rows or in their task; else one board, with an empty
    label and heading: the models are one group, or the groups have the same K and number of rows
    (the same data set in another order, or relabelled: the rows warning, :func:`board_warning`,
    says how to put them on one board; a board per group would rank nothing).

    >>> a = {"name": "a", "num_classes": 10, "fingerprint": {"rows": 6000, "labels": "01"}}
    >>> b = {"name": "b", "num_classes": 100, "fingerprint": {"rows": 6000, "labels": "02"}}
    >>> [(board.label, board.heading) for board in boards([a, b, a])]
    [('K = 10', 'K = 10: 2 models on the same 6,000 rows'), ('K = 100', 'K = 100: 1 model on 6,000 rows')]
    >>> [(board.label, len(board.models)) for board in boards([a, a])]
    [('', 2)]
    """
    models = list(models)
    groups, apart = _grouped(models)
    if not groups or apart is None:
        return [Board("", "", models)]
    kind, values = apart
    made = []
    for (fp, members), value in zip(groups, values):
        rows = fp.get("rows")
        rows = f"{rows:,} rows" if isinstance(rows, int) else f"{rows} rows"
        label = f"task {value}" if kind == "task" else f"K = {value}" if kind == "with K =" else value
        count = f"{len(members)} model{'s' if len(members) > 1 else ''}"
        if kind == "of":  # the label is the number of rows
            where = " on the same rows" if len(members) > 1 else ""
        else:
            where = f" on the same {rows}" if len(members) > 1 else f" on {rows}"
        made.append(Board(label, f"{label}: {count}{where}", members))
    return made


def board_warning(models) -> str | None:
    """The rows warning (:func:`leaderboard_warning`) of models :func:`boards` keeps on one board (the
    same K and number of rows, other rows); None when they are one group, or have a board per group."""
    return leaderboard_warning(models) if len(boards(models)) == 1 else None


def split_line(count: int) -> str:
    """The line above the boards of models that were not evaluated on the same rows."""
    return f"the models were split into {count} boards: they were not all evaluated on the same rows"


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
            f"'{_name(baseline)}' ({what}); judge it on the baseline's rows, or give {said('allow_other_data', True)}")
