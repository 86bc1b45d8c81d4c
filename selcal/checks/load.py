"""Reading result JSON files for ``selcal check``: the schema, the judged values, each
metric of a model with its interval."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from ..errors import SelcalError
from ..metrics import catalog
from ..metrics.catalog import better


# Directions and levels are the catalog's (selcal.metrics.catalog); these names stay for callers.
LOWER_IS_BETTER = tuple(k for k, m in catalog.CATALOG.items() if m.lower_is_better is True and not m.family)
HIGHER_IS_BETTER = tuple(k for k, m in catalog.CATALOG.items() if m.lower_is_better is False and not m.family)
MODEL_LEVEL = catalog.model_level()
SUPPORTED_SCHEMA = 1
CHECK_RULE = (
    "regression = worse than the baseline by more than the tolerance and, when both files have "
    "bootstrap intervals, significantly so: one-sided p-value from the two intervals, Holm over "
    "every judged metric at family-wise level (1 - confidence) / 2"
)
COMPARE_RULE = (
    "B - A on paired bootstrap resamples: regression = worse by more than the tolerance with a "
    "one-sided paired bootstrap p-value that Holm rejects over every judged metric at family-wise "
    "level (1 - confidence) / 2"
)


# --------------------------------------------------------------------------- loading
def load_result(path) -> dict[str, Any]:
    """Read and validate a result JSON written by ``selcal evaluate --json`` (schema 1)."""
    path = str(path)
    if not os.path.exists(path):
        raise SelcalError(f"{path}: no such file; check the path (write it with `selcal evaluate --json {path}`)")
    if os.path.isdir(path):
        raise SelcalError(f"{path}: is a folder; give the JSON file `selcal evaluate --json` wrote")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        _refuse_other_kind(path)
        if isinstance(exc, UnicodeDecodeError):
            raise SelcalError(f"{path}: not UTF-8 text, so not a result JSON; give the file `selcal evaluate --json` "
                              "wrote") from None
        raise SelcalError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno}); "
                          "give the file `selcal evaluate --json` wrote") from None
    except RecursionError:  # hostile nesting (e.g. 100 000 levels of [[[...]]]): no result is that deep
        raise SelcalError(f"{path}: JSON nested too deeply to be a selcal result; "
                          "give the file `selcal evaluate --json` wrote") from None
    except OSError as exc:
        raise SelcalError(f"{path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(data, dict) or "schema" not in data:
        _refuse_other_kind(path)
        raise SelcalError(f"{path}: not a selcal result (no 'schema' key); give the file `selcal evaluate --json` wrote")
    schema = data["schema"]
    if schema != SUPPORTED_SCHEMA:
        raise SelcalError(f"{path}: has result schema {schema!r} but this selcal reads schema {SUPPORTED_SCHEMA}; "
                          "evaluate both files with the same selcal version")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise SelcalError(f"{path}: schema 1 result without a non-empty 'models' list; regenerate it with selcal evaluate")
    for index, model in enumerate(models):
        if not isinstance(model, dict) or not isinstance(model.get("name"), str) \
                or not isinstance(model.get("scores"), dict):
            raise SelcalError(f"{path}: models[{index}] lacks 'name' or 'scores'; regenerate it with selcal evaluate")
    for model in models:
        _check_values(path, model)
    names = [m["name"] for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SelcalError(f"{path}: two models are named '{duplicates[0]}'; names must be unique to be matched")
    return data


def _refuse_other_kind(path: str) -> None:
    """A file of another kind (a dump, a check report) said as what it is, with the command that takes it."""
    from ..io.kinds import sniff, wrong_kind

    kind = sniff(path)
    if kind is not None and "result JSON" not in kind.what:
        raise SelcalError(f"{path}: {wrong_kind(kind, 'check reads the result JSON `selcal evaluate --json` writes')}")


def _check_values(path: str, model: dict[str, Any]) -> None:
    """Refuse a judged metric whose value is neither a number nor null (a string would count as undefined)."""
    def bad(key: str, value) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):  # NaN/Infinity: not JSON, never written
            raise SelcalError(f"{path}: model '{model['name']}', key '{key}': {json.dumps(value)[:40]} is not a "
                              "number or null; give the file `selcal evaluate --json` wrote")

    for key in MODEL_LEVEL:
        bad(key, model.get(key))
    for score, values in model["scores"].items():
        if not isinstance(values, dict):
            raise SelcalError(f"{path}: model '{model['name']}', key 'scores.{score}' is not an object; "
                              "give the file `selcal evaluate --json` wrote")
        for key, value in values.items():
            if better(key) is not None:
                bad(f"scores.{score}.{key}", value)


@dataclass
class Metric:
    """One directed number of one model in a result: ``name`` is ``score.metric`` or a model-level key."""

    model: str
    name: str
    score: str | None
    metric: str
    value: float | None
    ci: list[float] | None
    group: str | None = None  # a metric within a group of rows (--group-col): named GROUP/score.metric


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _interval(value) -> list[float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_number(v) is not None for v in value):
        return [float(value[0]), float(value[1])]
    return None


def metrics_of(model: dict[str, Any], groups: bool = False) -> dict[str, Metric]:
    """Every metric with a direction of a model's JSON dict, keyed by qualified name; with ``groups``,
    those of each group (``--group-col``) too, named ``GROUP/accuracy`` and ``GROUP/score.metric``."""
    out: dict[str, Metric] = {}
    if groups and isinstance(model.get("groups"), dict):
        for group, values in model["groups"].items():
            if not isinstance(values, dict):
                continue
            group_ci = values.get("ci") if isinstance(values.get("ci"), dict) else {}
            if "accuracy" in values:
                out[f"{group}/accuracy"] = Metric(model["name"], f"{group}/accuracy", None, "accuracy",
                                                  _number(values["accuracy"]), _interval(group_ci.get("accuracy")),
                                                  group=str(group))
            for name, metric in _score_metrics(model["name"], values.get("scores"), f"{group}/").items():
                out[name] = Metric(**{**metric.__dict__, "group": str(group)})
    model_ci = model.get("ci") if isinstance(model.get("ci"), dict) else {}
    for key in MODEL_LEVEL:
        if key in model:
            out[key] = Metric(model["name"], key, None, key, _number(model[key]), _interval(model_ci.get(key)))
    out.update(_score_metrics(model["name"], model["scores"]))
    return out


def _score_metrics(model: str, scores, prefix: str = "") -> dict[str, Metric]:
    """The directed metrics of a ``scores`` dict (a model's, or a group's), named ``PREFIXscore.metric``."""
    out: dict[str, Metric] = {}
    for score, values in (scores if isinstance(scores, dict) else {}).items():
        if not isinstance(values, dict):
            continue
        score_ci = values.get("ci") if isinstance(values.get("ci"), dict) else {}
        for key, value in values.items():
            if better(key) is not None:
                name = f"{prefix}{score}.{key}"
                out[name] = Metric(model, name, score, key, _number(value), _interval(score_ci.get(key)))
    return out
