"""One Python API, equal to the CLI (issue 11): ``selcal.evaluate`` and ``selcal.evaluate_arrays``
take the CLI's options as keyword arguments, return an EvaluationResult, follow the same
conventions (hold-out, one binary logit = (0, v), ignore-label, groups, bootstrap) and give
the very numbers of ``selcal evaluate`` on the same rows. Arrays may be numpy, lists,
pandas or polars objects (torch: test_api_torch.py); errors name Python arguments.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import selcal
from selcal.errors import OptionError, SelcalError
from selcal.report import EvaluationResult

FLAGS = ["--scores", "msp,max_logit,pnorm,temp", "--bins", "20", "--risks", "0.02,0.2", "--coverages", "0.7",
         "--p-grid", "1-3,6", "--val-fraction", "0.3", "--seed", "5", "--no-center", "--aurc-estimator", "trapz",
         "--pnorm-objective", "augrc", "--temp-objective", "aurc"]
KEYWORDS = dict(scores="msp,max_logit,pnorm,temp", bins=20, risks="0.02,0.2", coverages=[0.7], p_grid="1-3,6",
                val_fraction=0.3, seed=5, center=False, aurc_estimator="trapz", pnorm_objective="augrc",
                temp_objective="aurc")


def model_json(result) -> dict:
    return json.loads(result.to_json())["models"][0]


# =========================================================== the numbers of the CLI
def test_hold_out_with_default_options_equals_the_cli(cli, dumps, data, h):
    logits, labels = data
    expected = cli.json(dumps.parquet("m.parquet", logits, labels, dtype="float64"))
    result = selcal.evaluate_arrays(logits, labels)
    assert isinstance(result, EvaluationResult) and len(result.models) == 1
    assert model_json(result)["split"] == "holdout"
    h.assert_same_numbers(model_json(result), expected["models"][0])
    assert json.loads(result.to_json())["options"] == expected["options"]


def test_every_keyword_option_equals_its_flag(cli, dumps, data, h):
    logits, labels = data
    expected = cli.json(dumps.parquet("m.parquet", logits, labels, dtype="float64"), *FLAGS)
    got = selcal.evaluate_arrays(logits, labels, **KEYWORDS)
    h.assert_same_numbers(model_json(got), expected["models"][0])
    assert json.loads(got.to_json())["options"] == expected["options"]
    path = dumps.parquet("n.parquet", logits, labels, dtype="float64")
    assert selcal.evaluate(str(path), **KEYWORDS).to_dict() == expected | {
        "models": [expected["models"][0] | {"path": str(path), "name": "n"}]}


def test_validation_arrays_equal_the_val_file(cli, dumps, data, h):
    logits, labels = data
    val_logits, val_labels = h.make_data(n=300, seed=7)
    expected = cli.json(dumps.parquet("t.parquet", logits, labels, dtype="float64"), "--val",
                        dumps.parquet("v.parquet", val_logits, val_labels, dtype="float64"))
    got = selcal.evaluate_arrays(logits, labels, val_logits, val_labels)
    h.assert_same_numbers(model_json(got), expected["models"][0], drop=("val_path",))
    assert model_json(got)["split"] == "val-file" and model_json(got)["n_val"] == 300


@pytest.mark.parametrize("shape", ["1-D", "N x 1"])
def test_one_binary_logit_means_logits_0_v(cli, dumps, shape, h):
    # Before: a 1-D array raised IndexError and K = 1 silently gave accuracy 1.0.
    rng = np.random.default_rng(3)
    v = np.round(rng.normal(size=500) * 16) / 8
    labels = (rng.random(500) < 1 / (1 + np.exp(-v))).astype(np.int64)
    logits = v if shape == "1-D" else v[:, None]
    got = model_json(selcal.evaluate_arrays(logits, labels, scores="msp,max_logit"))
    two = model_json(selcal.evaluate_arrays(np.stack([np.zeros(500), v], axis=1), labels, scores="msp,max_logit"))
    assert got["accuracy"] == float(np.mean((v > 0) == labels)) < 1
    assert got["binary_logit"] is True
    h.assert_same_numbers(got, two, drop=("binary_logit",))
    expected = cli.json(dumps.npz("b.npz", v[:, None], labels, dtype="float64"), "--scores", "msp,max_logit")
    h.assert_same_numbers(got, expected["models"][0])


def test_ignore_label_and_groups_as_on_the_command_line(cli, dumps, data, h):
    logits, labels = data
    labels = labels.copy()
    labels[::7] = 255
    groups = np.where(np.arange(labels.size) % 3 == 0, "a", "b")
    path = dumps.parquet("g.parquet", logits, labels, dtype="float64", extra={"source": groups.tolist()})
    expected = cli.json(path, "--ignore-label", "255", "--group-col", "source", "--scores", "msp,max_logit")
    got = selcal.evaluate_arrays(logits, labels, ignore_label=255, groups=groups, scores="msp,max_logit")
    h.assert_same_numbers(model_json(got), expected["models"][0])
    assert model_json(got)["n_ignored"] == int(np.sum(labels == 255))


@pytest.mark.slow
def test_bootstrap_through_the_same_code_as_the_cli(cli, dumps, data, h):
    logits, labels = data
    expected = cli.json(dumps.parquet("m.parquet", logits, labels, dtype="float64"), "--bootstrap", "50",
                        "--confidence", "0.9", "--scores", "msp,temp", "--bootstrap-refit")
    got = json.loads(selcal.evaluate_arrays(logits, labels, bootstrap=50, confidence=0.9, scores="msp,temp",
                                            bootstrap_refit=True).to_json())
    assert got["bootstrap"] == expected["bootstrap"] == {"resamples": 50, "seed": 0, "confidence": 0.9, "refit": True}
    h.assert_same_numbers(got["models"][0], expected["models"][0])


@pytest.mark.slow
def test_the_result_feeds_the_plots_and_the_html_report(tmp_path):
    from selcal.figures import write_plots
    from selcal.report.html import write_report

    rng = np.random.default_rng(1)
    logits = rng.normal(size=(400, 5)) * 3
    labels = np.where(rng.random(400) < 0.7, logits.argmax(axis=1), rng.integers(0, 5, 400))
    result = selcal.evaluate_arrays(logits, labels, name="mine")
    figures = write_plots(result, tmp_path / "figs", "png")
    assert figures and all(f.path.is_file() for f in figures)
    write_report(result, tmp_path / "report.html")
    assert "mine" in (tmp_path / "report.html").read_text()
    both = EvaluationResult([result, selcal.evaluate_arrays(logits[::-1], labels[::-1], name="reversed")])
    assert [m.name for m in both.models] == ["mine", "reversed"]
    assert result.scores is result.models[0].scores  # one model: the result answers for it


# ============================================================ array kinds
def _arrays(n=300, k=4):
    rng = np.random.default_rng(2)
    logits = (np.round(rng.normal(size=(n, k)) * 16) / 8).astype(np.float32)
    labels = np.where(rng.random(n) < 0.7, logits.argmax(axis=1), rng.integers(0, k, n))
    return logits, labels


def test_lists_give_the_numbers_of_numpy():
    logits, labels = _arrays()
    a = selcal.evaluate_arrays(logits, labels).to_json()
    assert selcal.evaluate_arrays(logits.tolist(), labels.tolist()).to_json() == a
    assert selcal.evaluate_arrays(logits, labels.astype(np.float64)).to_json() == a  # whole floats


def test_polars_series_and_dataframes():
    import polars as pl

    logits, labels = _arrays()
    a = selcal.evaluate_arrays(logits, labels).to_json()
    frame = pl.DataFrame({f"logit_{k}": logits[:, k] for k in range(logits.shape[1])})
    assert selcal.evaluate_arrays(frame, pl.Series("label", labels)).to_json() == a
    lists = pl.Series("logits", logits.tolist(), dtype=pl.List(pl.Float32))
    assert selcal.evaluate_arrays(lists, pl.Series(labels)).to_json() == a
    array = pl.Series("logits", logits, dtype=pl.Array(pl.Float32, logits.shape[1]))
    assert selcal.evaluate_arrays(array, pl.Series(labels)).to_json() == a


def test_pandas_series_and_dataframes():
    pd = pytest.importorskip("pandas")
    logits, labels = _arrays()
    a = selcal.evaluate_arrays(logits, labels).to_json()
    assert selcal.evaluate_arrays(pd.DataFrame(logits), pd.Series(labels)).to_json() == a
    assert selcal.evaluate_arrays(pd.DataFrame(logits).astype("Float32"), pd.Series(labels, dtype="Int64")).to_json() == a


@pytest.mark.slow
def test_torch_is_not_imported_for_numpy_arrays():
    code = ("import sys, numpy as np, selcal; selcal.evaluate_arrays(np.eye(3) * 3, [0, 1, 2], scores='msp'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ============================================================ errors name Python arguments
@pytest.mark.parametrize("change, message", [
    (lambda l, y: (np.where(np.arange(l.size).reshape(l.shape) == 13, np.nan, l), y),
     "logits: row 3 holds NaN for class 1; logits must be finite"),
    (lambda l, y: (l, np.where(np.arange(y.size) == 5, 9, y)), "labels: row 5: label 9 is outside 0 .. 3"),
    (lambda l, y: (l, y[:-1]), "labels: has 299 labels but logits has 300 rows"),
    (lambda l, y: (l, y + 0.5), "labels: row 0: has label"),
    (lambda l, y: (l, np.where(np.arange(y.size) == 2, 1e20, y)), "labels: row 2: label 1e+20 is outside 0 .. 3"),
    (lambda l, y: (l[:, :, None], y), "logits: has shape (300, 4, 1)"),
    (lambda l, y: (l[:0], y[:0]), "logits: has no rows"),
])
def test_bad_arrays_are_refused_naming_the_argument(change, message):
    logits, labels = _arrays()
    logits, labels = change(logits.astype(np.float64), labels)
    with pytest.raises(SelcalError) as info:
        selcal.evaluate_arrays(logits, labels, scores="msp")
    assert str(info.value).startswith(message), str(info.value)
    assert "--" not in str(info.value)


def test_bad_options_name_python_arguments_and_unknown_ones_are_type_errors():
    logits, labels = _arrays()
    with pytest.raises(OptionError, match="^bins must be at least 1, got 0$"):
        selcal.evaluate_arrays(logits, labels, bins=0)
    with pytest.raises(OptionError, match="^bootstrap takes at most"):
        selcal.evaluate_arrays(logits, labels, bootstrap=10**9)
    with pytest.raises(TypeError, match="'bns'"):
        selcal.evaluate_arrays(logits, labels, bns=3)
    with pytest.raises(SelcalError, match="val_logits and val_labels go together"):
        selcal.evaluate_arrays(logits, labels, logits)
    with pytest.raises(SelcalError, match="^val_logits: has K = 3 classes but logits has K = 4"):
        selcal.evaluate_arrays(logits, labels, logits[:, :3], labels % 3)


def test_evaluate_arrays_says_labels_look_1_based_as_the_cli_does():
    import pytest
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 4))
    labels = logits.argmax(1) + 1  # 1 .. 4
    with pytest.raises(selcal.SelcalError, match="look 1-based"):
        selcal.evaluate_arrays(logits, labels)
    with pytest.raises(selcal.SelcalError, match=r"label 9 is outside 0 \.\. 3 \(pass ignore_label="):
        selcal.evaluate_arrays(logits, np.where(np.arange(300) == 5, 9, logits.argmax(1)))
