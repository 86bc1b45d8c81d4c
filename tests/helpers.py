"""Helpers shared by the tests (the fixtures are in conftest.py): data makers, dump writers, the in-process
CLI runner, comparisons of results, the checks every refusal and every results JSON must pass.

Importable from any test file as ``helpers`` (pyproject: ``pythonpath = ["tests"]``); the brute-force
references are in ``oracles/``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import selcal
from selcal.bootstrap import RowData
from selcal.cli import app
from selcal.io.segmentation import label_grid
from selcal.metrics import calibration, catalog, selective, smooth

ROOT = Path(__file__).resolve().parents[1]  # the repository
SAMPLES = ROOT / "sample_logits"

# The shared real data (public models' saved logits): ``shared/realdata`` beside the clone, or the folder
# SELCAL_REALDATA names. It is optional: the tests that need it skip through :func:`realdata`, whose
# reason starts with REALDATA_ABSENT; conftest.py counts those skips and says so at the end of the run.
REALDATA = Path(os.environ.get("SELCAL_REALDATA") or ROOT.parent / "shared" / "realdata").absolute()
REALDATA_ABSENT = "selcal real data absent:"


def realdata(*parts: str) -> Path:
    """The file or folder ``REALDATA / parts``; the test skips when it is not there."""
    path = REALDATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{REALDATA_ABSENT} {path}")
    return path


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


def split_data(n: int, k: int, seed: int, val_every: int):
    """:func:`make_data` with a split column: every ``val_every``-th row ``val``, the others ``test``."""
    logits, labels = make_data(n=n, k=k, seed=seed)
    return logits, labels, np.where(np.arange(n) % val_every == 0, "val", "test")


def model_json(*paths, **kwargs) -> dict:
    """The one model of ``selcal.evaluate(*paths, **kwargs).to_json()``, parsed."""
    result = json.loads(selcal.evaluate(*[str(p) for p in paths], **kwargs).to_json())
    assert len(result["models"]) == 1
    return result["models"][0]


def canonical_model(dumps, logits, labels, split, **kwargs) -> dict:
    """:func:`model_json` of the canonical layout, a Parquet file with a split column: what every
    other layout of the same numbers must give."""
    return model_json(dumps.parquet("canonical.parquet", logits, labels, split=split, **kwargs))


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


def mixed_zoo(dumps: Dumps, ks=(4, 6), n: int = 300) -> list[str]:
    """A zoo mixing data sets: three models per K, each K on its own rows (its labels), the files interleaved
    (k4, k6, k4, ...): a board per K."""
    paths: dict[int, list[str]] = {}
    for k in ks:
        _, labels = make_data(n=n, k=k, seed=k)
        for j, sharpness in enumerate((0.5, 2.5, 1.2)):
            logits, _ = make_data(n=n, k=k, seed=10 * k + j)
            logits[np.arange(n), labels] += sharpness
            paths.setdefault(k, []).append(str(dumps.npz(f"k{k}_m{j}.npz", logits, labels)))
    return [path for group in zip(*paths.values()) for path in group]


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

    def json_file(self, out: Path, *args) -> Path:
        """``selcal evaluate ARGS --json OUT -q``; fails the test on any non-zero exit; returns OUT."""
        result = self("evaluate", *args, "--json", out, "-q")
        assert result.exit_code == 0, result.stderr
        return out


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


@functools.lru_cache(maxsize=1)
def result_validator():
    import jsonschema

    from selcal.results import json_schema

    return jsonschema.Draft202012Validator(json_schema())


def result_schema_errors(document: dict) -> list[str]:
    """What makes ``document`` (a results JSON, schema 1) invalid by selcal/schema/result-1.json, one line
    per error naming where; empty when it is valid."""
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}"
            for error in result_validator().iter_errors(document)]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def drawn_texts(figure) -> list[tuple[str, str, bool | str]]:
    """(the string as set, what matplotlib draws, whether it is parsed as mathtext) of every text."""
    from matplotlib.text import Text

    out = []
    for text in figure.findobj(Text):
        raw = text.get_text()
        if raw:
            shown, math_mode = text._preprocess_math(raw)
            out.append((raw, shown, math_mode))
    return out


def assert_refused(result, must_contain=(), row=None):
    """Exit 2, one 'selcal: error:' line on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, repr(result.exception))
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"stderr has {len(lines)} lines: {result.stderr!r}"
    line = lines[0]
    assert line.startswith("selcal: error:"), line
    for text in must_contain:
        assert text in line, f"{text!r} not named in: {line}"
    if row is not None:
        # The first row the line names is where it says the problem is ("column 'x', row N: ...").
        first = re.search(r"\brow (\d+)\b", line)
        assert first and int(first.group(1)) == row, f"row {row} not named as the offending row in: {line}"
    # The line is for the user of a command: no Python/numpy reprs, no advice that only
    # applies to someone calling numpy themselves.
    assert not re.search(r"\bnp\.\w+\(", line), f"numpy repr in: {line}"
    assert "allow_pickle" not in line and "pickle.load" not in line, f"numpy's pickle advice in: {line}"
    assert result.stdout == "", f"stdout not empty: {result.stdout!r}"
    return line


SELECTIVE_FRACTIONS = ("aurc", "augrc", "auroc", "fpr95")


PER_SCORE_FRACTIONS = ("ece", "aece", "mce", "cece")


NULL_WHEN_UNDEFINED = {"auroc", "fpr95"}


MAY_BE_NULL = {"temperature_fallback", "val_path", "p"}


def _walk(value, path=""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    else:
        yield path, value


def _in(value, low, high, what):
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{what} = {value!r} is not a number"
    assert math.isfinite(value) and low <= value <= high, f"{what} = {value!r} outside [{low}, {high}]"


def check_bounds(model: dict, scores: set):
    """Every number finite and within its bounds; null only where undefined for the data."""
    for where, value in _walk(model):
        if isinstance(value, float):
            assert math.isfinite(value), f"{where} = {value!r}"
        if value is None:
            leaf = where.rsplit(".", 1)[-1]
            assert leaf in NULL_WHEN_UNDEFINED | MAY_BE_NULL, f"{where} is null but defined for this data"
    accuracy = model["accuracy"]
    _in(accuracy, 0, 1, "accuracy")
    _in(model["error"], 0, 1, "error")
    assert accuracy + model["error"] == pytest.approx(1.0, abs=1e-15)
    _in(model["nll"], 0, math.inf, "nll")
    _in(model["brier"], 0, 2, "brier")
    _in(model["cece"], 0, 1, "cece")
    undefined = accuracy in (0.0, 1.0)
    assert set(model["scores"]) == scores, sorted(model["scores"])
    for name, metrics in model["scores"].items():
        for key in SELECTIVE_FRACTIONS:
            value = metrics[key]
            if key in NULL_WHEN_UNDEFINED and undefined:
                assert value is None, f"{name}.{key} = {value!r}: undefined with accuracy {accuracy}, must be null"
                continue
            _in(value, 0, 1, f"{name}.{key}")
        _in(metrics["eaurc"], -1e-12, 1, f"{name}.eaurc")
        assert metrics["eaurc"] <= metrics["aurc"] + 1e-12, (name, metrics["eaurc"], metrics["aurc"])
        assert metrics["augrc"] <= metrics["aurc"] + 1e-12, (name, metrics["augrc"], metrics["aurc"])
        for key, value in metrics.items():
            if key.startswith(("cov@", "risk@")):
                _in(value, 0, 1, f"{name}.{key}")
            if key in PER_SCORE_FRACTIONS:
                _in(value, 0, 1, f"{name}.{key}")
        if accuracy == 1.0:
            assert metrics["aurc"] == 0.0 and metrics["augrc"] == 0.0, (name, metrics)
        if accuracy == 0.0:
            assert metrics["aurc"] == pytest.approx(1.0, rel=1e-12), (name, metrics["aurc"])
    if "temp" in model["scores"]:
        temp = model["scores"]["temp"]
        _in(temp["temperature"], 5e-324, math.inf, "temp.temperature")
        assert temp["temperature"] > 0
        _in(temp["nll"], 0, math.inf, "temp.nll")
        _in(temp["brier"], 0, 2, "temp.brier")
        for key in ("ece", "aece", "mce"):
            _in(temp[key], 0, 1, f"temp.{key}")
    if "pnorm" in model["scores"]:
        pnorm = model["scores"]["pnorm"]
        assert isinstance(pnorm["fallback"], bool)
        assert pnorm["p"] is None or pnorm["p"] in range(1, 11), pnorm["p"]
    for name in ("msp", "temp"):
        if name in model["scores"]:
            for key in ("ece", "aece", "mce"):
                assert key in model["scores"][name], (name, key)


CLASSES = ("cat", "dog", "fox")


def write_images(root: Path, corrupt: bool = True) -> Path:
    """DATA/CLASS/*.jpg|png: 4 images per class in several sizes and modes (RGB, L, P, RGBA),
    a corrupt 'image', a text file and a hidden file (both ignored)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for i in range(4):
            h, w = 40 + 17 * i, 64 - 6 * c
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            image = Image.fromarray(pixels)
            if (c, i) == (0, 1):
                image = image.convert("L")
            elif (c, i) == (1, 2):
                image = image.convert("P")
            elif (c, i) == (2, 3):
                image = image.convert("RGBA")
            jpeg = i % 2 == 0 and image.mode in ("RGB", "L")
            image.save(root / name / (f"img{i}.jpg" if jpeg else f"img{i}.png"))
    if corrupt:
        (root / "dog" / "broken.jpg").write_bytes(b"this is not a JPEG")
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / "fox" / ".hidden.jpg").write_bytes(b"")
    return root


def make_folder(folder, *, n=6, k=4, h=8, w=12, big_h=16, big_w=24, seed=0, label_seed=100, dtype=np.float32,
                void=0.2, order=None, sizes=None):
    """``n`` images with random logits (seed) and random labels with void pixels (label_seed)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    label_rng = np.random.default_rng(label_seed)
    items = []
    for i in range(n):
        hh, ww, bh, bw = sizes[i] if sizes else (h, w, big_h, big_w)
        label = label_rng.integers(0, k, size=(bh, bw))
        label[label_rng.random((bh, bw)) < void] = 255
        logits = rng.normal(size=(k, hh, ww)) * 2
        logits[label_grid(label, hh, ww)[None].repeat(k, 0) == np.arange(k)[:, None, None]] += 1.5  # some skill
        items.append((f"img{i:03d}", logits.astype(dtype), label.astype(np.uint8)))
    for index in (order or range(n)):
        name, logits, label = items[index]
        np.savez(os.path.join(folder, f"{name}.npz"), logits=logits, label=label)
    return items


def brute_force_rows(items, ignore=255):
    """Every labelled logit cell of every image, flattened, with the label at the cell centre (a loop)."""
    logits, labels, ids = [], [], []
    for name, image_logits, label in sorted(items, key=lambda item: item[0]):
        k, h, w = image_logits.shape
        big_h, big_w = label.shape
        for i in range(h):
            for j in range(w):
                y = int(label[math.floor((i + 0.5) * big_h / h), math.floor((j + 0.5) * big_w / w)])
                if y != ignore:
                    logits.append(image_logits[:, i, j])
                    labels.append(y)
                    ids.append(f"{name}/{i}/{j}")
    return np.array(logits), np.array(labels), np.array(ids)


RISKS = (0.0, 0.01, 0.1, 0.3, 1.0)


COVERAGES = (0.01, 0.5, 0.9, 1.0)


def tied_data(n, rng, *, accuracy=0.7, levels=3, bins=15, estimator="mean"):
    """Rows whose scores and confidences take few distinct values (heavy ties)."""
    correct = rng.random(n) < accuracy
    score = np.round(rng.normal(correct * 1.0, 1.0) * levels) / levels
    confidence = np.clip(np.round(rng.uniform(0.05, 1.0, n) * 2 * levels) / (2 * levels), 0.05, 1.0)
    return RowData(
        correct=correct,
        scores={"s": score, "q": np.log(confidence)},
        confidence={"q": confidence},
        row_means={"nll": rng.exponential(size=n), "q.brier": rng.random(n)},
        risks=RISKS, coverages=COVERAGES, estimator=estimator, bins=bins,
    )


def plain_metrics(data: RowData, rows: np.ndarray) -> dict:
    """What selective.py and calibration.py say on the rows ``rows`` (an index array)."""
    correct = data.correct[rows]
    out = {"model": {"accuracy": correct.mean(), "error": 1 - correct.mean(), "nll": data.row_means["nll"][rows].mean()}}
    for name, score in data.scores.items():
        curve = selective.risk_coverage(score[rows], correct)
        out[name] = selective.selective_metrics(curve, risks=data.risks, coverages=data.coverages,
                                                estimator=data.estimator)
    q = data.confidence["q"][rows]
    out["q"].update(
        ece=calibration.expected_calibration_error(q, correct, data.bins),
        rmsce=calibration.rms_calibration_error(q, correct, data.bins),
        aece=calibration.adaptive_calibration_error(q, correct, data.bins),
        mce=calibration.maximum_calibration_error(q, correct, data.bins),
        brier=data.row_means["q.brier"][rows].mean(),
        # resamples: smooth ECE on the coarser grid of the catalog's resample entry (test_smooth bounds its error)
        smece=smooth.smooth_ece(q, correct, **catalog.SMOOTH_RESAMPLE).value,
        smece_sigma=smooth.smooth_ece(q, correct, **catalog.SMOOTH_RESAMPLE).sigma,
    )
    return out


def shifted_logits(n: int, k: int, seed: int, shift: float = 2.0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), labels] += shift
    return logits, labels


def save_npz(path, logits, labels):
    np.savez(path, logits=logits.astype(np.float32), labels=labels)
    return str(path)


def calibrated_result(names, scores=("msp", "max_logit", "temp", "vector", "isotonic")):
    options = selcal.Options(scores=scores, bins=10)
    models = []
    for seed, name in enumerate(names):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, 4, size=900)
        logits = rng.normal(size=(900, 4)) * (1 + seed % 2)
        logits[np.arange(900), labels] += 1.5
        models.append(selcal.evaluate_arrays(logits[300:], labels[300:], logits[:300], labels[:300], name=name,
                                             options=options))
    return selcal.EvaluationResult(models=models, options=options)


def write_parquet(path: Path, n: int = 200, k: int = 4, seed: int = 1, extra: dict | None = None) -> Path:
    logits, labels = make_data(n, k, seed)
    columns = {"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.astype(np.float32).ravel()), k),
               "label": pa.array(labels)}
    columns.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:  # (pyarrow cannot open a name that is not UTF-8)
        pq.write_table(pa.table(columns), out)
    return path


def one_error_line(result, *parts: str) -> str:
    """The one 'selcal: error:' line of a command refused with exit 2 (no traceback), naming every one
    of ``parts``."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- metric keys, read from the catalog
def selective_keys(risks=None, coverages=None) -> list[str]:
    """The selective keys of a score's results (the catalog's selective section, its families ``cov@`` and
    ``risk@`` expanded at the given targets, by default those of Options), in the table's order."""
    from selcal.metrics import catalog
    from selcal.options import DEFAULT_COVERAGES, DEFAULT_RISKS

    targets = {"cov@": DEFAULT_RISKS if risks is None else risks,
               "risk@": DEFAULT_COVERAGES if coverages is None else coverages}
    return [k for key in catalog.section("selective")
            for k in ([f"{key}{t:g}" for t in targets[key]] if key in targets else [key])]


def confidence_keys() -> list[str]:
    """The keys computed from a score's top-label confidence (ECE, RMSCE, adaptive ECE, MCE, smooth ECE, ...)."""
    from selcal.metrics import catalog

    return [key for metric in catalog.computations() for key in metric.gives]


def interval_keys(metrics) -> set[str]:
    """The keys of a score's results that ``--bootstrap`` gives an interval: a row of the table with an interval."""
    from selcal.metrics import catalog

    return {key for key in metrics if catalog.get(key) is not None and catalog.get(key).section
            and catalog.has_interval(key)}


def selcal_command() -> list[str]:
    """The ``selcal`` console script of this interpreter's environment (or ``python -m selcal.cli``)."""
    script = Path(sys.executable).with_name("selcal")
    return [str(script)] if script.exists() else [sys.executable, "-m", "selcal.cli"]


def run_cli(*args):
    """``selcal ARGS`` in-process (typer's CliRunner), stdout and stderr apart."""
    return CliRunner().invoke(app, [str(a) for a in args])


class PickleBomb:
    """An object whose unpickling writes the file ``marker``: a pickle that must never be loaded."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


CE = SAMPLES / "calibrator_cifar10_resnet50_ce.parquet"  # a ResNet-50 on CIFAR-10, cross-entropy
FOCAL = SAMPLES / "calibrator_cifar10_resnet50_focal.parquet"  # the same with focal loss


def write_dump(path, logits, labels, *, split=None, ids=None, groups=None, dtype=np.float32, row_group_rows=None):
    """A Parquet dump: ``logits`` as a fixed-size list column (cast to ``dtype``; None keeps the array's),
    an int64 ``label``, and optionally ``split``, ``id`` and a group column ``source``."""
    logits = np.asarray(logits) if dtype is None else np.asarray(logits, dtype)
    columns = {"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), logits.shape[1]),
               "label": pa.array(np.asarray(labels, np.int64))}
    if split is not None:
        columns["split"] = pa.array(list(split))
    if ids is not None:
        columns["id"] = pa.array(list(ids))
    if groups is not None:
        columns["source"] = pa.array(list(groups))
    pq.write_table(pa.table(columns), path, row_group_size=row_group_rows)
    return path


def model_interval_keys() -> set[str]:
    """The model-level keys that ``--bootstrap`` gives an interval (accuracy, error, NLL, Brier, ...)."""
    from selcal.metrics import catalog

    return {key for key in catalog.model_level(judged=False) if catalog.has_interval(key)}


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=20000")


def browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("SELCAL_REQUIRE_CHROMIUM") == "1":
        pytest.fail("SELCAL_REQUIRE_CHROMIUM=1 but no chromium on PATH (.ci/run installs Debian's chromium)")
    pytest.skip("no chromium on PATH (apt-get install chromium)")


def run_browser(executable: str, page: Path, width: int, *extra: str) -> str:
    with tempfile.TemporaryDirectory(prefix="selcal-chromium-") as profile:
        done = subprocess.run([executable, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},1600",
                               *extra, page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# ------------------------------------------------------------------ studies (tests/study)
def run_logits(n: int, k: int = 5, data_seed: int = 0, run_seed: int = 0, quality: float = 1.0,
               shuffle: float = 0.0):
    """(logits float32 (n, k), labels): one data set's rows (labels and difficulty from
    ``data_seed``) seen by one run (its noise and its scale from ``run_seed``). ``quality`` scales
    the label's margin; ``shuffle`` moves that share of the rows' logits to other rows (a run whose
    confidence is unrelated to those rows' labels)."""
    data = np.random.default_rng(data_seed)
    labels = data.integers(0, k, n)
    margin = data.gamma(3.0, 1.2, n)
    confuser = (labels + data.integers(1, k, n)) % k
    pull = data.gamma(1.5, 1.0, n)
    run = np.random.default_rng([data_seed, run_seed, 7])
    logits = run.normal(0.0, 1.0, (n, k))
    rows = np.arange(n)
    logits[rows, labels] += quality * margin * run.uniform(0.8, 1.2, n)
    logits[rows, confuser] += pull * run.uniform(0.8, 1.2, n)
    logits *= run.uniform(0.8, 1.25)  # the run's own confidence scale (its calibration)
    if shuffle:
        moved = run.choice(n, size=int(round(shuffle * n)), replace=False)
        logits[moved] = logits[run.permutation(moved)]
    return logits.astype(np.float32), labels


def write_run(path: Path, n: int = 600, k: int = 5, data_seed: int = 0, run_seed: int = 0, n_val: int = 200,
              order_seed: int | None = None, **kwargs) -> Path:
    """A run's dump: ``n_val`` validation rows then ``n`` test rows, ids ``val/i`` and ``test/i``;
    ``order_seed`` shuffles the rows in the file (same rows, another order)."""
    logits, labels = run_logits(n + n_val, k, data_seed, run_seed, **kwargs)
    ids = np.array([f"val/{i}" for i in range(n_val)] + [f"test/{i}" for i in range(n)])
    split = np.array(["val"] * n_val + ["test"] * n)
    order = np.arange(n + n_val) if order_seed is None else np.random.default_rng(order_seed).permutation(n + n_val)
    table = pa.table({"id": ids[order], "split": split[order], "label": labels[order],
                      "logits": pa.FixedSizeListArray.from_arrays(pa.array(logits[order].ravel()), k)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def write_study(folder: Path, datasets=("d1",), recipes=("a", "b"), seeds=(0, 1, 2), quality=None, shuffle=None,
                **kwargs) -> list[Path]:
    """``folder/{dataset}/{recipe}_seed{seed}.parquet`` for every combination; ``quality`` and
    ``shuffle``: recipe -> value."""
    paths = []
    for d, dataset in enumerate(datasets):
        for r, recipe in enumerate(recipes):
            for seed in seeds:
                paths.append(write_run(folder / dataset / f"{recipe}_seed{seed}.parquet", data_seed=d,
                                       run_seed=1000 * r + seed, quality=(quality or {}).get(recipe, 1.0),
                                       shuffle=(shuffle or {}).get(recipe, 0.0), **kwargs))
    return paths

