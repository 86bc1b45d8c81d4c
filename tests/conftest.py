"""Fixtures for the I/O and CLI tests: small logit dumps written into tmp_path.

Every dump is written with pyarrow (Parquet) or numpy (.npz) exactly in one of the
layouts of CONVENTIONS.md, "Input". The default data set has logits that are
multiples of 1/8 in [-16, 16], so they are exactly representable in float16 and every
layout and dtype holds the very same numbers.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from selcal.cli import app

FLOAT_TYPES = {"float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64()}
NUMPY_FLOATS = {"float16": np.float16, "float32": np.float32, "float64": np.float64}

# Keys that name where a result came from, not what it is (the fingerprint of the rows differs
# with their order or their ids, which these comparisons change on purpose).
PLACE_KEYS = ("name", "path", "val_path", "fingerprint")


def make_data(n: int = 400, k: int = 4, seed: int = 1, accuracy: float = 0.75):
    """(logits float64 (n, k) exactly representable in float16, labels int64 (n,)).

    About ``accuracy`` of the argmax predictions are correct; logits are multiples of
    1/8 so some scores tie (the tie handling is part of what is compared).
    """
    rng = np.random.default_rng(seed)
    logits = np.clip(np.round(rng.normal(0.0, 2.5, size=(n, k)) * 8) / 8, -16, 16)
    pred = logits.argmax(axis=1)
    wrong = (pred + rng.integers(1, max(k, 2), size=n)) % max(k, 2)
    labels = np.where(rng.random(n) < accuracy, pred, wrong).astype(np.int64)
    assert np.array_equal(logits.astype(np.float16).astype(np.float64), logits)
    return logits, labels


def boosted_logits(n: int, k: int = 4, seed: int = 0, scale: float = 2.0, boost: float = 1.0):
    """(logits float64 (n, k), labels): N(0, scale) logits whose label's logit is raised by a
    Gamma(2, boost) amount, so that the model is right more often than chance and over-confident
    (a calibrator has something to fix)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(0.0, scale, (n, k))
    logits[np.arange(n), labels] += rng.gamma(2.0, boost, n)
    return logits, labels


def list_type(layout: str, value_type: pa.DataType, k: int) -> pa.DataType:
    if layout == "list":
        return pa.list_(value_type)
    if layout == "large_list":
        return pa.large_list(value_type)
    if layout == "fixed_size_list":
        return pa.list_(value_type, k)
    raise ValueError(layout)


def logits_array(logits: np.ndarray, layout: str = "list", dtype: str = "float32") -> pa.Array:
    """A list-typed Arrow array, one list of K floats per row, built from flat values."""
    logits = np.asarray(logits)
    n, k = logits.shape
    values = pa.array(logits.astype(NUMPY_FLOATS[dtype]).ravel(), type=FLOAT_TYPES[dtype])
    if layout == "fixed_size_list":
        return pa.FixedSizeListArray.from_arrays(values, k)
    offsets = np.arange(0, n * k + 1, k)
    if layout == "list":
        return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values)
    if layout == "large_list":
        return pa.LargeListArray.from_arrays(pa.array(offsets, type=pa.int64()), values)
    raise ValueError(layout)


class Dumps:
    """Writes dumps into one tmp folder. Each method returns the file's Path."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def table(self, name: str, columns: dict, *, row_group_size: int | None = None, metadata=None) -> Path:
        """Write a Parquet file from a dict of column name -> Arrow array (or Python list)."""
        table = pa.table(columns)
        if metadata:
            table = table.replace_schema_metadata(metadata)
        path = self.path(name)
        pq.write_table(table, path, row_group_size=row_group_size)
        return path

    def parquet(
        self,
        name: str,
        logits,
        labels,
        *,
        layout: str = "list",
        dtype: str = "float32",
        split=None,
        label_col: str = "label",
        logits_col: str = "logits",
        extra: dict | None = None,
        row_group_size: int | None = None,
        wide_order=None,
    ) -> Path:
        """One dump. ``layout``: list, large_list, fixed_size_list or wide (logit_0..logit_{K-1})."""
        logits = np.asarray(logits)
        columns: dict = {}
        if layout == "wide":
            order = range(logits.shape[1]) if wide_order is None else wide_order
            for k in order:
                columns[f"logit_{k}"] = pa.array(logits[:, k].astype(NUMPY_FLOATS[dtype]), type=FLOAT_TYPES[dtype])
        else:
            columns[logits_col] = logits_array(logits, layout, dtype)
        columns[label_col] = pa.array(np.asarray(labels), type=pa.int64())
        if split is not None:
            columns["split"] = pa.array(list(split), type=pa.string())
        columns.update(extra or {})
        return self.table(name, columns, row_group_size=row_group_size)

    def npz(self, name: str, logits, labels, *, split=None, dtype: str = "float32", **arrays) -> Path:
        path = self.path(name)
        content = {"logits": np.asarray(logits).astype(NUMPY_FLOATS[dtype]), "labels": np.asarray(labels)}
        if split is not None:
            content["split"] = np.asarray(split, dtype=str)
        content.update(arrays)
        np.savez(path, **content)
        return path


@pytest.fixture
def dumps(tmp_path) -> Dumps:
    return Dumps(tmp_path / "in")


@pytest.fixture
def data():
    return make_data()


@pytest.fixture
def out_dir(tmp_path) -> Path:
    """An empty folder for --json outputs (checked to stay empty after a failed run)."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


class Cli:
    """Runs ``selcal`` in-process; stdout and stderr are kept apart."""

    def __init__(self):
        self.runner = CliRunner()

    def __call__(self, *args, **kwargs):
        return self.runner.invoke(app, [str(a) for a in args], **kwargs)

    def json(self, *args) -> dict:
        """``selcal evaluate ARGS --json -`` parsed; fails the test on any non-zero exit."""
        result = self("evaluate", *args, "--json", "-")
        assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)
        return strict_json(result.stdout)


@pytest.fixture
def cli() -> Cli:
    return Cli()


def _refuse_constant(name):
    raise AssertionError(f"JSON holds the non-standard constant {name}")


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity."""
    return json.loads(text, parse_constant=_refuse_constant)


def numbers_only(model: dict, drop=()) -> dict:
    """A model's JSON dict without the keys that say where it came from."""
    return {k: v for k, v in model.items() if k not in PLACE_KEYS and k not in drop}


def assert_same_numbers(a: dict, b: dict, drop=()):
    """Two models' results agree in every number (compared exactly), names and paths aside."""
    a, b = numbers_only(a, drop), numbers_only(b, drop)
    if a != b:
        lines = []
        for key in sorted(set(a) | set(b)):
            if a.get(key, "<missing>") != b.get(key, "<missing>"):
                if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
                    for sub in sorted(set(a[key]) | set(b[key])):
                        if a[key].get(sub, "<missing>") != b[key].get(sub, "<missing>"):
                            lines.append(f"{key}.{sub}: {a[key].get(sub, '<missing>')!r} != {b[key].get(sub, '<missing>')!r}")
                else:
                    lines.append(f"{key}: {a.get(key, '<missing>')!r} != {b.get(key, '<missing>')!r}")
        raise AssertionError("results differ:\n" + "\n".join(lines[:40]))


# ---------------------------------------------------------------- every results JSON against its schema
@functools.lru_cache(maxsize=1)
def _result_validator():
    import jsonschema

    from selcal.results import json_schema

    return jsonschema.Draft202012Validator(json_schema())


def result_schema_errors(document: dict) -> list[str]:
    """What makes ``document`` (a results JSON, schema 1) invalid by selcal/schema/result-1.json, one line
    per error naming where; empty when it is valid."""
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}"
            for error in _result_validator().iter_errors(document)]


@pytest.fixture(scope="session", autouse=True)
def every_results_json_follows_its_schema():
    """Every results JSON the test suite writes is checked against the published JSON Schema: in this
    process as it is written (``EvaluationResult.to_json``: the CLI's ``--json``, the API's, the
    report's), and the file (or standard output) of a ``selcal ... --json`` command run through
    ``subprocess.run``; an invalid one fails the test that wrote it. Without the ``jsonschema``
    package (the test extra) nothing is checked."""
    try:
        _result_validator()
    except ImportError:
        yield
        return
    from selcal.results import EvaluationResult

    written = EvaluationResult.to_json

    def checked(self) -> str:
        text = written(self)
        errors = result_schema_errors(json.loads(text))
        if errors:
            raise AssertionError("the results JSON breaks selcal/schema/result-1.json: " + "; ".join(errors[:5]))
        return text

    import subprocess

    started = subprocess.run

    def run_then_check(args, *positional, **keywords):
        """A ``selcal ... --json PATH`` run in a subprocess (outside this process's to_json): its file,
        or its standard output for ``--json -``, checked once the command succeeded."""
        done = started(args, *positional, **keywords)
        words = [str(a) for a in args] if isinstance(args, (list, tuple)) else []
        if done.returncode == 0 and "--json" in words[:-1] and any("selcal" in w for w in words):
            target = words[words.index("--json") + 1]
            text = done.stdout if target in ("-", "/dev/stdout") else (
                Path(target).read_text() if Path(target).is_file() else None)
            if isinstance(text, bytes):
                text = text.decode()
            document = _json_document(text)
            if isinstance(document, dict) and document.get("schema") == 1 and "models" in document:
                errors = result_schema_errors(document)
                if errors:
                    raise AssertionError(f"{target} breaks selcal/schema/result-1.json: " + "; ".join(errors[:5]))
        return done

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EvaluationResult, "to_json", checked)
        patch.setattr(subprocess, "run", run_then_check)
        yield


def _json_document(text):
    """The JSON of ``text`` (a results JSON printed alone), or None."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@pytest.fixture
def h():
    """The helper functions above, for the test modules (conftest is not importable by name)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        make_data=make_data,
        logits_array=logits_array,
        strict_json=strict_json,
        numbers_only=numbers_only,
        assert_same_numbers=assert_same_numbers,
        is_number=is_number,
        FLOAT_TYPES=FLOAT_TYPES,
    )
