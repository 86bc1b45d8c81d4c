"""The streamed path: same bits as the in-memory path, and memory bounded by the chunks."""

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import write_dump

import selcal


def synthetic(n, k, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)).astype(np.float32)
    logits[np.arange(n), labels] += rng.gamma(2.0, 1.5, n).astype(np.float32)
    logits[: n // 10] = np.round(logits[: n // 10])  # some exact ties
    return logits, labels


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["split column", "holdout", "val file", "no fitting"])
def test_streamed_equals_in_memory_bit_for_bit_on_many_small_row_groups(tmp_path, layout):
    logits, labels = synthetic(3000, 7, seed=1)
    kwargs = {}
    split = None
    if layout == "split column":
        split = np.where(np.arange(3000) % 4 == 0, "val", "test")
    if layout == "val file":
        val_logits, val_labels = synthetic(800, 7, seed=2)
        write_dump(tmp_path / "val.parquet", val_logits, val_labels, row_group_rows=37, dtype=None)
        kwargs["val"] = str(tmp_path / "val.parquet")
    if layout == "no fitting":
        kwargs["scores"] = ("msp", "max_logit")
    write_dump(tmp_path / "test.parquet", logits, labels, split=split, row_group_rows=53, dtype=None)
    path = str(tmp_path / "test.parquet")
    reference = selcal.evaluate(path, stream=False, **kwargs).to_json()
    for chunk_rows in (1, 17, 4096):
        streamed = selcal.evaluate(path, stream=True, chunk_rows=chunk_rows, **kwargs).to_json()
        assert streamed == reference, f"chunk_rows={chunk_rows}"
    assert selcal.evaluate(path, stream=True, workers=1, **kwargs).to_json() == reference


PEAK_RSS = """
import json, sys


def peak_mb():
    # VmHWM, not ru_maxrss: ru_maxrss keeps the parent's peak across fork + exec.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024


import selcal
val = sys.argv[3] if sys.argv[3] != "-" else None
result = selcal.evaluate(sys.argv[1], val, stream=True, scores=tuple(sys.argv[2].split(",")))
result.to_json()
print(json.dumps({"peak_mb": peak_mb(), "n_eval": result.models[0].n_eval}))
"""


def peak_rss_mb(path, scores, val) -> dict:
    out = subprocess.run([sys.executable, "-c", PEAK_RSS, str(path), scores, str(val or "-")], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("scores", [
    "msp,max_logit",             # nothing to fit
    "msp,max_logit,pnorm,temp",  # fitted on a --val file of fixed size, as in the 2 000 000-row case
])
def test_streamed_memory_grows_with_the_per_row_numbers_not_the_logits(tmp_path, scores):
    """Peak RSS of the streamed path on 30 000 and 120 000 rows x 400 classes (48 and 192 MB of
    logits, many chunk budgets each): its growth per extra row must stay well below the 1600
    bytes of logits a row holds (the per-row numbers and their sorts cost a few hundred)."""
    k, sizes = 400, (30_000, 120_000)
    val_logits, val_labels = synthetic(5000, k, seed=4)
    val = tmp_path / "val.parquet"
    write_dump(val, val_logits, val_labels, dtype=None)
    peaks = []
    for n in sizes:
        logits, labels = synthetic(n, k, seed=3)
        path = tmp_path / f"{n}.parquet"
        write_dump(path, logits, labels, row_group_rows=4096, dtype=None)
        del logits
        peaks.append(peak_rss_mb(path, scores, val if "temp" in scores else None)["peak_mb"])
    bytes_per_row = (peaks[1] - peaks[0]) * 2**20 / (sizes[1] - sizes[0])
    assert bytes_per_row < 0.4 * k * 4, (peaks, bytes_per_row)


def test_streamed_batches_leave_the_ids_unread_and_give_the_in_memory_numbers(tmp_path, monkeypatch):
    # The ids are read once (id_column: the split, the leak check, the fingerprint, the confident errors);
    # a streamed pass's batches do not read and convert them again, and nothing changes for it.
    from selcal.io import base, parquet

    logits, labels = synthetic(2000, 5, seed=4)
    ids = [f"img_{i:05d}" for i in range(2000)]
    write_dump(tmp_path / "test.parquet", logits, labels, ids=ids, row_group_rows=300)
    val_logits, val_labels = synthetic(600, 5, seed=5)
    write_dump(tmp_path / "val.parquet", val_logits, val_labels, ids=[f"v_{i}" for i in range(600)])
    path, val = str(tmp_path / "test.parquet"), str(tmp_path / "val.parquet")
    reference = selcal.evaluate(path, val, stream=False).to_json()
    converted = []
    original = base.string_values

    def counting(source_path, column, values, *args, **kwargs):
        if column == "id" and source_path == path:
            converted.append(len(values))
        return original(source_path, column, values, *args, **kwargs)

    monkeypatch.setattr(parquet, "string_values", counting)
    streamed = selcal.evaluate(path, val, stream=True, chunk_rows=97)
    assert streamed.to_json() == reference
    assert converted == [2000]  # the whole column once, no batch of it
    assert streamed.models[0].row_ids[:3].tolist() == ids[:3]
