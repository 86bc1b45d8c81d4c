"""The leak check of a --val file (selcal/pipeline/split.py, CONVENTIONS.md "Leaks"): rows with equal
content count as shared only when that content identifies a row (once in each file), and only beyond
what the repeats within the files predict by chance. Saturated dumps (one-hot rows, float16 rows with
many duplicates) are no longer reported as leaks; copies, subsets and leaked rows of unique content are,
on both evaluation paths."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import selcal
from selcal.pipeline.split import SharedRows, count_shared_rows

WARNING = "evaluation rows are also validation rows of"


# ------------------------------------------------------------------ the rule, written again
def reference_count(eval_logits, eval_labels, val_logits, val_labels) -> int:
    """The rule of CONVENTIONS.md "Leaks" with Python tuples and Counters (no hashing)."""
    if not len(eval_labels) or not len(val_labels):
        return 0
    content = lambda x, y: [(int(b), *map(float, a)) for a, b in zip(x, y)]  # noqa: E731
    k = np.shape(eval_logits)[1]
    columns = sorted({round(j * (k - 1) / 7) for j in range(8)}) if k > 1 else [0]
    probe = lambda x, y: [(int(b), *(float(a[j]) for j in columns)) for a, b in zip(x, y)]  # noqa: E731
    a, b = Counter(content(eval_logits, eval_labels)), Counter(content(val_logits, val_labels))
    shared = sum(1 for c, count in a.items() if count == 1 and b.get(c) == 1)
    if not shared:
        return 0
    pa_, pb = Counter(probe(eval_logits, eval_labels)), Counter(probe(val_logits, val_labels))
    doubles = sum(1 for key, count in pa_.items() if count == 2 and key not in pb) + \
        sum(1 for key, count in pb.items() if count == 2 and key not in pa_)
    r = len(eval_labels) / len(val_labels)
    chance = 2 * r * doubles / (r * r + 1)
    return shared if shared > chance + 3 * math.sqrt(chance) else 0


def chunked(logits, labels, val: SharedRows, sizes) -> int:
    total, start = 0, 0
    for size in sizes:
        total += count_shared_rows(logits[start:start + size], labels[start:start + size], val)
        start += size
    return total + count_shared_rows(logits[start:], labels[start:], val)


@st.composite
def two_files(draw):
    """Rows drawn from a small set of values (so contents repeat), some test rows copied into val."""
    k = draw(st.integers(1, 10))
    levels = draw(st.integers(1, 4))
    n, m = draw(st.integers(0, 60)), draw(st.integers(0, 60))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    unique = draw(st.booleans())
    values = lambda rows: (rng.normal(size=(rows, k)) if unique else rng.integers(0, levels, (rows, k)) / 4)  # noqa: E731
    test, val = values(n), values(m)
    test_labels, val_labels = rng.integers(0, 3, n), rng.integers(0, 3, m)
    leaked = rng.choice(n, size=min(n, draw(st.integers(0, 10))), replace=False) if n else np.zeros(0, int)
    val, val_labels = np.concatenate([val, test[leaked]]), np.concatenate([val_labels, test_labels[leaked]])
    order = rng.permutation(val_labels.size)
    sizes = draw(st.lists(st.integers(0, 20), max_size=5))
    return test, test_labels, val[order], val_labels[order], sizes


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(two_files())
def test_the_count_is_the_rule_on_any_rows_whole_or_in_chunks(case):
    test, test_labels, val, val_labels, sizes = case
    want = reference_count(test, test_labels, val, val_labels)
    assert count_shared_rows(test, test_labels, SharedRows(val, val_labels)) == want
    assert chunked(test, test_labels, SharedRows(val, val_labels), sizes) == want


# ------------------------------------------------------------------ saturated dumps: no false alarm
def one_hot_dump(n, k, seed, accuracy=0.8):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    pred = np.where(rng.random(n) < accuracy, labels, rng.integers(0, k, n))
    return np.eye(k)[pred], labels


def float16_dump(n, k, seed, scale=6.0):
    """Softmax probabilities of confident logits, stored as float16: many rows round to the same values."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    z = rng.normal(size=(n, k))
    z[np.arange(n), labels] += scale * rng.gamma(2.0, 1.0, n)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p = (p / p.sum(axis=1, keepdims=True)).astype(np.float16)
    return p, labels


def evaluated(dumps, name, test, test_labels, val, val_labels, dtype="float32", extra=(None, None), **kwargs):
    t = dumps.parquet(f"{name}/test.parquet", test, test_labels, dtype=dtype, extra=extra[0])
    v = dumps.parquet(f"{name}/val.parquet", val, val_labels, dtype=dtype, extra=extra[1])
    models = []
    for stream in (False, True):
        model = json.loads(selcal.evaluate(str(t), str(v), stream=stream, scores=("msp", "temp"), **kwargs).to_json())
        models.append(model["models"][0])
    assert models[0]["warnings"] == models[1]["warnings"]
    return [w for w in models[0]["warnings"] if WARNING in w], v


def shared_by_content(test, test_labels, val, val_labels) -> int:
    """The former count: evaluation rows whose logits and label are those of some validation row."""
    rows = {(int(y), *map(float, x)) for x, y in zip(val, val_labels)}
    return sum((int(y), *map(float, x)) in rows for x, y in zip(test, test_labels))


def test_a_one_hot_dump_is_no_leak(dumps):
    test, test_labels = one_hot_dump(3000, 5, seed=1)
    val, val_labels = one_hot_dump(1000, 5, seed=2)
    assert shared_by_content(test, test_labels, val, val_labels) > 2900  # what was reported as a leak
    warned, _ = evaluated(dumps, "onehot", test, test_labels, val, val_labels)
    assert warned == []


def test_a_float16_dump_with_many_duplicate_rows_is_no_leak(dumps):
    test, test_labels = float16_dump(4000, 3, seed=3, scale=8.0)
    val, val_labels = float16_dump(2000, 3, seed=4, scale=8.0)
    assert np.unique(np.column_stack([test, test_labels]), axis=0).shape[0] < 0.7 * 4000  # many duplicates
    assert shared_by_content(test, test_labels, val, val_labels) > 1000
    warned, _ = evaluated(dumps, "half", test, test_labels, val, val_labels, dtype="float16")
    assert warned == []


@pytest.mark.slow
@pytest.mark.parametrize("k,scale", [(10, 6.0), (10, 10.0), (2, 6.0), (100, 8.0)])
def test_independent_saturated_files_are_no_leak_whatever_their_sizes(k, scale):
    for n, m, seed in ((20000, 5000, 1), (20000, 1000, 2), (3000, 6000, 3)):
        test, test_labels = float16_dump(n, k, seed, scale)
        val, val_labels = float16_dump(m, k, seed + 100, scale)
        assert count_shared_rows(test, test_labels, SharedRows(val, val_labels)) == 0, (n, m)


# ------------------------------------------------------------------ true leaks: still reported
def unique_dump(n, k, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, k)).astype(np.float32), rng.integers(0, k, n)


def message(count, val_path):
    """The warning of ``selcal.evaluate``, which names its argument val (the command line says --val)."""
    return [f"{count} evaluation rows are also validation rows of {val_path} (same logits and label): the fit "
            "has seen them; pass a val file without the TEST rows"]


def test_a_copy_of_the_test_file_is_a_leak(dumps):
    test, labels = unique_dump(500, 4, seed=5)
    warned, v = evaluated(dumps, "copy", test, labels, test.copy(), labels.copy())
    assert warned == message(500, v)


def test_a_subset_of_the_test_file_with_ids_is_a_leak(dumps):
    test, labels = unique_dump(500, 4, seed=6)
    rows = np.random.default_rng(0).choice(500, 120, replace=False)
    ids = np.array([f"img{i:04d}" for i in range(500)])
    warned, v = evaluated(dumps, "subset", test, labels, test[rows], labels[rows],
                          extra=({"id": pa.array(ids)}, {"id": pa.array(ids[rows])}))
    assert warned == message(120, v)


def test_leaked_rows_of_unique_content_in_a_saturated_dump_are_a_leak(dumps):
    """A one-hot dump whose few unsaturated rows (unique content) are copied into the val file."""
    test, test_labels = one_hot_dump(2000, 4, seed=7)
    rng = np.random.default_rng(8)
    soft = rng.dirichlet(np.ones(4), size=30)  # 30 rows of unique content among the one-hot ones
    test[:30] = soft
    val, val_labels = one_hot_dump(1000, 4, seed=9)
    leaked = [3, 5, 8, 13, 21, 22, 29]
    val, val_labels = np.concatenate([val, test[leaked]]), np.concatenate([val_labels, test_labels[leaked]])
    warned, v = evaluated(dumps, "leak", test, test_labels, val, val_labels, dtype="float64")
    assert warned == message(7, v)


def test_a_copy_of_a_float16_dump_is_a_leak_of_its_rows_of_unique_content():
    test, labels = float16_dump(4000, 3, seed=10)
    contents = Counter((int(y), *map(float, x)) for x, y in zip(test, labels))
    identifying = sum(1 for count in contents.values() if count == 1)
    assert count_shared_rows(test, labels, SharedRows(test.copy(), labels.copy())) == identifying > 1000
    half = np.arange(0, 4000, 2)
    assert count_shared_rows(test, labels, SharedRows(test[half], labels[half])) > 300


@pytest.mark.slow
def test_the_same_count_in_any_chunks_of_the_streamed_path():
    test, labels = float16_dump(3000, 3, seed=11)
    val, val_labels = float16_dump(1000, 3, seed=12)
    val, val_labels = np.concatenate([val, test[:40]]), np.concatenate([val_labels, labels[:40]])
    whole = count_shared_rows(test, labels, SharedRows(val, val_labels))
    for rows in (1, 7, 256, 2999):
        assert chunked(test, labels, SharedRows(val, val_labels), [rows] * (3000 // rows)) == whole


def test_the_counts_of_the_evaluation_keys_are_those_of_a_counter():
    from selcal.pipeline.split import _KeyCounts

    rng = np.random.default_rng(13)  # (counts of 0 to 3, 3 for three or more: what A and B ask)
    counts, seen = _KeyCounts(), Counter()
    for size in rng.integers(0, 300, 40):
        keys = rng.integers(0, 500, size).astype(np.uint64)
        unique, repeats = np.unique(keys, return_counts=True)
        assert counts.counts(unique).tolist() == [min(seen[k], 3) for k in unique.tolist()]
        counts.add(unique, repeats)
        seen.update(keys.tolist())
    assert len(counts.runs) <= 2 * np.log2(sum(seen.values())) + 1
    every = np.arange(500, dtype=np.uint64)
    assert counts.counts(every).tolist() == [min(seen[k], 3) for k in range(500)]
