"""Scores that installed packages declare: the entry points of the group ``selcal.scores``.

They are loaded once, by the command line before its help names the scores (and by a remote worker).
An entry point that fails to load, or registers a name already taken, is skipped as a whole (none of
its scores is kept) and named in one warning (:data:`PROBLEMS`); every command still works.
"""

from __future__ import annotations

from . import registry

__all__ = ["ENTRY_POINT_GROUP", "PROBLEMS", "load_entry_points"]

ENTRY_POINT_GROUP = "selcal.scores"

# One line per entry point that was skipped, for the command line to print as warnings.
PROBLEMS: list[str] = []

_loaded = False


def load_entry_points() -> list[str]:
    """Load the scores that installed packages declare in the entry point group ``selcal.scores``
    (once; the CLI calls it). Each entry point names a :class:`~selcal.scores.Score` (added), or a
    function called with no argument that registers its scores. Returns the names added; an entry
    point that fails is skipped and described in :data:`PROBLEMS`."""
    global _loaded
    if _loaded:
        return []
    _loaded = True
    from importlib.metadata import entry_points

    before = set(registry.REGISTRY)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        problem = _load_one(point)
        if problem:
            PROBLEMS.append(problem)
    return [name for name in registry.REGISTRY if name not in before]


def _load_one(point) -> str | None:
    """Load one entry point; on any failure restore the registry as it was and say why."""
    where = f"entry point {point.name!r} ({point.value}) of {ENTRY_POINT_GROUP}"
    kept = dict(registry.REGISTRY)
    registry.registering.append(where)
    try:
        target = point.load()
        if isinstance(target, registry.Score):
            if registry.REGISTRY.get(target.name) is not target:  # (its module may have added it on import)
                registry.add(target)
        elif callable(target):
            target()
        else:
            raise TypeError(f"it names a {type(target).__name__}, not a Score nor a function that registers scores")
    except Exception as exc:  # noqa: BLE001  (a broken plug-in must not break every command)
        registry.REGISTRY.clear()
        registry.REGISTRY.update(kept)
        text = " ".join(str(exc).split())
        if isinstance(exc, ValueError) and "already registered" in text:
            return f"{text}; none of its scores is kept"
        return f"the {where} failed to load and is skipped: {type(exc).__name__}: {text[:300]}"
    finally:
        registry.registering.pop()
    return None
