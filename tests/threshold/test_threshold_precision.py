"""``selcal threshold --dtype float32|float64`` (issue 33, "Threshold edges"): the certificate was for
float64 confidences while a service usually computes a float32 softmax; on the cross-entropy sample the
float32 decision differs on 181 of about 3 800 accepted rows. With ``--dtype float32`` the confidences are
computed in float32, the certificate is for those, and every output names the precision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import make_data, one_error_line, strict_json
from scipy.special import softmax

import selcal
from selcal.threshold import guarantee
from selcal.threshold.precision import softmax_confidence_float32

CE = Path(__file__).resolve().parents[2] / "sample_logits" / "calibrator_cifar10_resnet50_ce.parquet"


@pytest.fixture(scope="module")
def ce():
    table = pq.read_table(CE).to_pydict()
    logits = np.array(table["logits"], dtype=np.float32)
    split, labels = np.array(table["split"]), np.array(table["label"])
    return logits, labels, split == "val", split == "test"


def _float32_msp(logits):
    """A float32 softmax as a service runs it (scipy keeps float32 inputs in float32), its largest value."""
    return softmax(np.asarray(logits, dtype=np.float32), axis=1).max(axis=1)


def test_a_float32_service_decides_181_accepted_rows_otherwise_unless_certified_in_float32(ce):
    logits, labels, _, test = ce
    theta = selcal.threshold(str(CE), risk=0.01).entries[0].threshold
    exact = np.exp(selcal.scores.log_msp(logits[test].astype(np.float64)))  # selcal's float64 confidence
    service = _float32_msp(logits[test])
    assert int(np.count_nonzero(exact >= theta)) == 3805
    assert int(np.count_nonzero((exact >= theta) != (service >= theta))) == 181  # the finding, reproduced
    entry = selcal.threshold(str(CE), risk=0.01, dtype="float32").entries[0]
    assert entry.evaluation.accepted == int(np.count_nonzero(service >= entry.threshold))  # what the service does


def test_float32_certifies_the_confidences_a_float32_softmax_gives(ce):
    logits, labels, val, test = ce
    result = selcal.threshold(str(CE), risk=0.01, dtype="float32")
    entry = result.entries[0]
    service = _float32_msp(logits).astype(np.float64)
    correct = logits.argmax(axis=1) == labels
    # the certificate is the core's on the float32 confidences of the calibration rows (ties at 1.0 together)
    cert = guarantee.sgr(service[val], correct[val], risk=0.01, delta=0.1)
    assert entry.threshold == cert.threshold and entry.certificate.accepted == cert.accepted
    assert np.float32(entry.threshold) == entry.threshold  # a float32 value: the comparison is exact either way
    # and the evaluation rows' numbers are what the float32 service's decision gives
    accepted = service[test] >= entry.threshold
    assert entry.evaluation.accepted == int(accepted.sum())
    assert entry.evaluation.errors == int(np.count_nonzero(accepted & ~correct[test]))
    assert entry.evaluation.risk <= 0.01


@pytest.mark.slow
def test_the_precision_is_named_in_every_output(cli, tmp_path):
    report = tmp_path / "t.html"
    for dtype in ("float32", "float64"):
        answer = strict_json(cli("threshold", CE, "--risk", "0.01", "--dtype", dtype, "--json", "-").stdout)
        assert answer["dtype"] == dtype
        assert f"(computed in {dtype})" in cli("threshold", CE, "--risk", "0.01", "--dtype", dtype).stdout
    assert strict_json(cli("threshold", CE, "--json", "-").stdout)["dtype"] == "float64"  # the default, said too
    table = cli("threshold", CE, "--risk", "0.01,0.05", "--dtype", "float32").stdout
    assert "score msp (computed in float32)" in table
    assert cli("threshold", CE, "--dtype", "float32", "--report", report).exit_code == 0
    assert "msp (computed in float32)" in report.read_text()


def test_float32_softmax_matches_an_independent_one_bit_for_bit(ce):
    logits = ce[0]
    mine, pred = softmax_confidence_float32(logits)
    assert mine.dtype == np.float32 and np.array_equal(mine, _float32_msp(logits))
    assert np.array_equal(pred, logits.argmax(axis=1))
    # confident rows tie in float32 (60 at exactly 1.0; 12 906 above 0.99999 share 84 values), where
    # selcal's float64 log-confidence keeps every row apart
    assert np.unique(mine).size == 1782 and np.count_nonzero(mine == 1.0) == 60
    assert np.unique(selcal.scores.log_msp(logits.astype(np.float64))).size == logits.shape[0] == 15000


def test_temp_in_float32_is_the_softmax_of_the_logits_times_one_over_t(ce):
    logits, labels, _, test = ce
    result = selcal.threshold(str(CE), score="temp", risk=0.02, dtype="float32")
    beta = np.float32(1.0 / result.state.temperature)
    service = softmax(logits[test] * beta, axis=1).max(axis=1).astype(np.float64)
    entry = result.entries[0]
    assert entry.evaluation.accepted == int(np.count_nonzero(service >= entry.threshold))


def test_streamed_and_in_memory_float32_are_the_same(ce):
    whole = selcal.threshold(str(CE), risk=[0.01, 0.05], dtype="float32", stream=False)
    streamed = selcal.threshold(str(CE), risk=[0.01, 0.05], dtype="float32", stream=True, chunk_rows=777)
    assert whole.to_json() == streamed.to_json()


def test_what_has_no_float32_softmax_is_refused_in_one_line(cli, dumps):
    one_error_line(cli("threshold", CE, "--dtype", "float16"), "--dtype must be float64 or float32")
    one_error_line(cli("threshold", CE, "--dtype", "float32", "--score", "max_logit"),
             "--dtype float32 computes a softmax in float32, and max_logit is not a softmax", "msp", "temp")
    import pyarrow as pa

    n = 200
    rng = np.random.default_rng(0)
    path = dumps.table("conf.parquet", {"confidence": pa.array(rng.random(n)), "pred": pa.array(np.zeros(n, np.int64)),
                                        "label": pa.array(np.zeros(n, np.int64)),
                                        "split": pa.array(["val"] * 150 + ["test"] * 50)})
    one_error_line(cli("threshold", path, "--risk", "0.3", "--dtype", "float32"), "--dtype has no meaning for a file of "
             "confidences")
    assert strict_json(cli("threshold", path, "--risk", "0.3", "--json", "-").stdout)["dtype"] == "stored"


def test_float64_logits_are_rounded_to_float32_first(dumps):
    logits, labels = make_data(n=600, accuracy=0.9)
    logits = logits + 1e-9 * np.arange(logits.shape[1])  # float64 values that float32 rounds
    path = dumps.parquet("m.parquet", logits, labels, dtype="float64", split=["val"] * 300 + ["test"] * 300)
    entry = selcal.threshold(str(path), risk=0.3, dtype="float32").entries[0]
    service = _float32_msp(logits[300:].astype(np.float32)).astype(np.float64)
    assert entry.evaluation.accepted == int(np.count_nonzero(service >= entry.threshold))
