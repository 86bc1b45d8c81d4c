"""The papers' remaining diagnostics: top-5 accuracy, MbLS's adaptive ECE, the most confident
errors, sweeps across runs, sorted-logit profiles. Each number against a brute-force loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import selcal
from selcal.evaluate import in_top_k
from selcal.report import leaderboard, leaderboard_csv, leaderboard_markdown


# ------------------------------------------------------------------------- top-5
def brute_top_k(logits, labels, k):
    """The label's position in each row sorted high to low, ties to the lower index, by a loop."""
    out = []
    for row, label in zip(logits.tolist(), labels.tolist()):
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        out.append(order.index(label) < k)
    return np.array(out, dtype=bool)


def tied_logits(rng, n, k, levels=3):
    """Logits on a coarse grid: most rows have ties, many of them around the label."""
    return rng.integers(0, levels, size=(n, k)).astype(np.float64)


@pytest.mark.parametrize("k_classes", [5, 6, 9, 40])
@pytest.mark.parametrize("levels", [2, 3, 1000])
def test_top_k_matches_a_sort_of_every_row(k_classes, levels):
    rng = np.random.default_rng(k_classes * levels)
    logits = tied_logits(rng, 400, k_classes, levels)
    labels = rng.integers(0, k_classes, 400)
    for k in (1, 2, 5):
        assert np.array_equal(in_top_k(logits, labels, k), brute_top_k(logits, labels, k))


def test_top_1_is_argmax_correctness():
    rng = np.random.default_rng(3)
    logits = tied_logits(rng, 500, 7, 2)
    labels = rng.integers(0, 7, 500)
    assert np.array_equal(in_top_k(logits, labels, 1), logits.argmax(axis=1) == labels)


@settings(max_examples=60, deadline=None)
@given(st.integers(5, 12), st.integers(1, 30), st.integers(0, 2**31), st.integers(1, 6))
def test_top5_property(k_classes, n, seed, levels):
    rng = np.random.default_rng(seed)
    logits = tied_logits(rng, n, k_classes, levels)
    labels = rng.integers(0, k_classes, n)
    assert np.array_equal(in_top_k(logits, labels, 5), brute_top_k(logits, labels, 5))


def _arrays(rng, n, k, sharp=1.0, levels=None):
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) if levels is None else tied_logits(rng, n, k, levels)
    logits[np.arange(n), labels] += sharp
    return logits, labels


def test_top5_accuracy_in_the_result_json_and_leaderboard():
    rng = np.random.default_rng(0)
    logits, labels = _arrays(rng, 1200, 12, sharp=0.5, levels=4)
    model = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp", "max_logit"), chunk_rows=37))
    expected = brute_top_k(logits, labels, 5).mean()
    assert model.top5_accuracy == expected
    assert model.models[0].to_dict()["top5_accuracy"] == expected
    keys = list(model.models[0].to_dict())
    assert keys.index("top5_accuracy") == keys.index("accuracy") + 1
    result = selcal.EvaluationResult(models=[model], options=selcal.Options())
    row = leaderboard(result, "top5_accuracy")[0]
    assert row["top5_accuracy"] == expected
    assert "top-5" in leaderboard_markdown([row])
    assert "top5_accuracy" in leaderboard_csv([row]).splitlines()[0]


def test_top5_accuracy_is_absent_below_five_classes():
    rng = np.random.default_rng(1)
    logits, labels = _arrays(rng, 300, 4)
    model = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp",)))
    assert model.top5_accuracy is None and "top5_accuracy" not in model.models[0].to_dict()


def test_top5_accuracy_on_a_sample_dump_streamed_and_in_memory():
    path = "sample_logits/netcal_densenetbc100c100.parquet"  # log-probabilities: exact ties at 0
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    test = table.filter(np.asarray(table.column("split").to_pylist()) == "test")
    logits = np.asarray(test.column("logits").to_pylist(), dtype=np.float32).astype(np.float64)
    labels = np.asarray(test.column("label").to_pylist())
    expected = brute_top_k(logits, labels, 5).mean()
    options = selcal.Options(scores=("msp",))
    in_memory = selcal.evaluate(path, options=options, stream=False).models[0]
    streamed = selcal.evaluate(path, options=options, stream=True).models[0]
    assert in_memory.top5_accuracy == streamed.top5_accuracy == expected
