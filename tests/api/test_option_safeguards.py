"""Numerical safeguards and bounded work (docs/CONVENTIONS.md, "Numerical safeguards and bounded work").

Each test here failed on the code before the safeguard: option values that ran out of
memory or time (or raised a numpy traceback) are refused in one line; class-wise bins do
not grow as K x bins; the bootstrap keeps one float64 per metric and resample, below a
stated ceiling; ``--bootstrap-refit`` does not depend on row order. (The p-norm at large p
is tested in test_scores.py, TestPnormLargeP.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

import selcal
from selcal import bootstrap
from selcal.api import MAX_BINS, MAX_P, MAX_P_GRID_VALUES, Options
from selcal.errors import OptionError, SelcalError
from selcal.metrics import calibration


def refused_line(result) -> str:
    """The one stderr line of a refused run (exit 2, no traceback)."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr, repr(result.exception))
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.stderr
    return lines[0]


# ============================================================ 1. limits, in one line
@pytest.mark.parametrize("args, expected", [
    (["--seed", "-1"], "selcal: error: --seed must be at least 0, got -1"),
    (["--seed", "-1", "--bootstrap", "10"], "selcal: error: --seed must be at least 0, got -1"),
    (["--bins", "0"], "selcal: error: --bins must be at least 1, got 0"),
    (["--bins", str(10**12)], f"--bins must be at most {MAX_BINS:,}"),
    (["--p-grid", "1-100000000000"], f"--p-grid may hold at most {MAX_P_GRID_VALUES} values of p"),
    (["--p-grid", "1,2," + str(10**30)], f"--p-grid takes p up to {MAX_P}"),
    (["--p-grid", "0-3"], "--p-grid must list positive integers"),
    (["--bootstrap", str(10**8)], f"--bootstrap takes at most {bootstrap.MAX_RESAMPLES:,} resamples"),
    (["--bootstrap", "1"], "--bootstrap takes the number of resamples, at least 2"),
    (["--confidence", "1.5", "--bootstrap", "10"], "--confidence must be between 0 and 1"),
])
def test_options_that_would_run_out_of_memory_or_time_are_refused_in_one_line(cli, dumps, data, args, expected):
    path = dumps.parquet("m.parquet", *data)
    started = time.monotonic()
    line = refused_line(cli("evaluate", path, "-q", *args))
    assert expected in line
    assert time.monotonic() - started < 5  # refused before any work, not after building a huge grid


@pytest.mark.parametrize("kwargs, expected", [
    ({"bins": 0}, "bins must be at least 1, got 0"),
    ({"seed": -1}, "seed must be at least 0, got -1"),
    ({"p_grid": "1-100000000"}, f"p_grid may hold at most {MAX_P_GRID_VALUES} values of p"),
    ({"p_grid": [1, 2.5]}, "p_grid must list positive integers"),
    ({"risks": "0.01,x"}, "risks takes numbers"),
    ({"val_fraction": 1.0}, "val_fraction must be between 0 and 1"),
    ({"scores": "msp,nope"}, "unknown score nope"),
])
def test_python_errors_name_python_arguments(kwargs, expected):
    with pytest.raises(OptionError) as info:
        Options(**kwargs)
    assert str(info.value).startswith(expected)
    assert "--" not in str(info.value)
    assert isinstance(info.value, SelcalError)


def test_options_take_text_and_lists_as_the_command_line_does():
    a = Options(scores="msp, temp", p_grid="1-4,8", risks="0.01,0.05", coverages=[0.5], bins=20.0)
    assert a.scores == ("msp", "temp") and a.p_grid == (1, 2, 3, 4, 8)
    assert a.risks == (0.01, 0.05) and a.coverages == (0.5,) and a.bins == 20 and isinstance(a.bins, int)
    assert Options(p_grid=range(1, 11)) == Options()


# ======================================================= 2. class-wise bins are sparse
def test_classwise_bins_do_not_grow_as_classes_times_bins():
    # Before: dense K x B int64 arrays, 4 of them: K = 100 000 and B = 1000 held 3.2 GB.
    rng = np.random.default_rng(0)
    k, n_bins = 100_000, 1000
    logits = rng.normal(size=(3, k)) * 4
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    bins = calibration.empty_classwise_bins(k, n_bins)
    bins += calibration.classwise_update(probabilities, np.array([0, 1, 2]), n_bins)
    held = bins.first.nbytes + bins.cells.nbytes + bins.values.nbytes
    assert held <= 32 * k + 40 * 3 * (n_bins + 1)
    dense = calibration.empty_classwise_bins(50, 7)  # and the numbers are those of the dense sum
    small = probabilities[:, :50] / probabilities[:, :50].sum(axis=1, keepdims=True)
    dense += calibration.classwise_update(small, np.array([0, 1, 2]), 7)
    assert calibration.classwise_calibration_error(dense) == pytest.approx(
        np.mean([np.abs(np.bincount(calibration.equal_width_bin(small[:, c], 7), weights=(np.arange(3) == c) - small[:, c],
                                    minlength=7)).sum() / 3 for c in range(50)]), rel=1e-12)


PEAK_SCRIPT = """
import sys, numpy as np
from selcal.cli import run
rng = np.random.default_rng(0)
np.savez(sys.argv[1], logits=rng.normal(size=(3, 100_000)).astype(np.float32), labels=np.array([0, 1, 2]))
sys.argv = ["selcal", "evaluate", sys.argv[1], "-q", "--scores", "msp,max_logit", "--bins", "1000"]
try:
    run()
except SystemExit as exc:
    assert exc.code == 0, exc.code
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(int(line.split()[1]) // 1024)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmHWM from /proc")
def test_wide_dump_with_many_bins_peaks_low(tmp_path):
    # Before: 4.8 GB peak (K = 100 000, 3 rows, --bins 1000); now about 100 MB.
    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(tmp_path / "wide.npz")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) < 400


# ========================================================= 3. bootstrap memory per resample
def _small_model(n=60, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, 4)) * 2
    labels = np.where(rng.random(n) < 0.7, logits.argmax(axis=1), rng.integers(0, 4, n))
    return selcal.evaluate_arrays(logits, labels, options=Options(scores=("msp", "max_logit")))


@pytest.mark.slow
def test_bootstrap_keeps_one_float64_per_metric_and_resample():
    model = _small_model()
    model = getattr(model, "models", [model])[0]
    data = bootstrap.RowData.from_model(model, Options(scores=("msp", "max_logit")))
    n_metrics = sum(len(v) for v in bootstrap.resample_metrics(data, np.zeros((1, data.n), dtype=np.int64)).values())
    peaks = {}
    # One thread: with several, which blocks are in flight at the peak varies from run to run (+-3 MB here,
    # 50-75 bytes a resample); and both counts past the first blocks, where the transients stop growing
    # (10 000 resamples were 2 blocks and gave 337 bytes a resample on CI's machine, 60 000 vs 20 000 give 256).
    for resamples in (20_000, 60_000):
        tracemalloc.start()
        bootstrap.row_intervals(data, resamples=resamples, options=Options(workers=1))
        peaks[resamples] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    per_resample = (peaks[60_000] - peaks[20_000]) / 40_000
    # One float64 per metric and resample, plus transients that do not grow with B (measured 1.00 x on
    # one thread). A per-resample list or copy, the regression this guards against, was 1.46 x.
    assert per_resample <= 8 * n_metrics * 1.25, (per_resample, n_metrics)


# ====================================================== 4. --bootstrap-refit and row order
@pytest.mark.slow
def test_bootstrap_refit_does_not_depend_on_row_order(cli, dumps, tmp_path):
    rng = np.random.default_rng(3)

    def rows(n):
        logits = np.round(rng.normal(size=(n, 3)) * 16) / 8
        labels = np.where(rng.random(n) < 0.7, logits.argmax(axis=1), rng.integers(0, 3, n))
        return logits, labels

    test, val = rows(120), rows(80)
    outputs = []
    for trial in range(2):
        order_t = np.arange(120) if trial == 0 else rng.permutation(120)
        order_v = np.arange(80) if trial == 0 else rng.permutation(80)
        t = dumps.parquet(f"t{trial}.parquet", test[0][order_t], test[1][order_t])
        v = dumps.parquet(f"v{trial}.parquet", val[0][order_v], val[1][order_v])
        result = cli("evaluate", t, "--val", v, "--bootstrap", "6", "--bootstrap-refit", "--json", "-",
                     "--scores", "msp,temp,pnorm", "--p-grid", "1-3")
        assert result.exit_code == 0, result.stderr
        document = json.loads(result.stdout)
        for model in document["models"]:
            model.pop("path"), model.pop("val_path"), model.pop("name")
            model.pop("fingerprint")  # without ids the rows are known by their order (CONVENTIONS.md)
        outputs.append(json.dumps(document, sort_keys=True))
    assert outputs[0] == outputs[1]
