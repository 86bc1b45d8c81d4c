"""Warnings about many models, grouped: one line per kind of warning, not one per model.

Two warnings are of one kind when their texts differ only in their numbers ("only 9 evaluation
rows" and "only 50 evaluation rows"); a group's line gives each number that differs as the range
its models span ("only 9–50 evaluation rows") and names its models as
:func:`selcal.checks.common_ground.describe_names` does (up to three by name, more by their count
and the pattern of their names). Pure: text in, text out; each medium escapes it itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["WarningGroup", "group_warnings", "warning_lines"]

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def _value(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass
class WarningGroup:
    """One kind of warning: its text (numbers that differ as ranges) and the models it is about,
    with each model's own text (in the order given)."""

    text: str
    models: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def line(self, of: int | None = None) -> str:
        """``MODEL: text`` for one model, ``DESCRIBED: text`` for several ("14 models (calpaper_*/test): ...")."""
        from ..checks.common_ground import describe_names

        return f"{describe_names(self.models, of)}: {self.text}"


def group_warnings(pairs) -> list[WarningGroup]:
    """(model, text) pairs grouped by kind, in the order each kind first appears.

    >>> groups = group_warnings([("a", "only 9 rows"), ("b", "only 50 rows"), ("a", "T = 1 kept"), ("c", "only 9 rows")])
    >>> [(g.text, g.models) for g in groups]
    [('only 9–50 rows', ['a', 'b', 'c']), ('T = 1 kept', ['a'])]
    """
    kinds: dict[tuple[str, int], WarningGroup] = {}
    numbers: dict[tuple[str, int], list[list[str]]] = {}
    for model, text in pairs:
        found = _NUMBER.findall(text)
        key = (_NUMBER.sub("#", text), len(found))
        group = kinds.setdefault(key, WarningGroup(text))
        group.models.append(model)
        group.texts.append(text)
        numbers.setdefault(key, []).append(found)
    for key, group in kinds.items():
        models = list(dict.fromkeys(group.models))
        slots = list(zip(*numbers[key]))
        if len(models) == 1 or not slots:
            group.models = models
            continue
        shown = []
        for values in slots:
            low, high = min(values, key=_value), max(values, key=_value)
            shown.append(low if _value(low) == _value(high) else f"{low}–{high}")
        parts = _NUMBER.split(group.texts[0])
        group.text = "".join(part + (shown[i] if i < len(shown) else "") for i, part in enumerate(parts))
        group.models = models
    return list(kinds.values())


def warning_lines(pairs, of: int | None = None) -> list[str]:
    """Each kind's line (:meth:`WarningGroup.line`); ``of``: how many models there are in all."""
    return [group.line(of) for group in group_warnings(pairs)]
