"""Pinned figures of the real models shipped in sample_logits/.

Each pinned number is also recomputed here by an independent route (the brute-force
references of tests/ref_*.py, reading the Parquet file with pyarrow directly), so a pin
cannot just echo what the code returned the day it was written. The DenseNet-40 ECE is
also checked against the published figure (Guo et al. 2017, table 1: 5.50% -> 0.95%).
"""

import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SAMPLES
from oracles import ref_calibration, ref_posthoc

import selcal

# file: (n_eval, n_val, correct predictions, msp AURC, msp ECE, T, p, pnorm falls back)
PINNED = {
    "calibrator_cifar10_resnet50_ce": (10000, 5000, 9505, 0.009504823203241917, 0.0435432540459551,
                                       2.4975199043229983, 2, False),
    "calibrator_cifar10_resnet50_focal": (10000, 5000, 9502, 0.006544745986185096, 0.01551284623114199,
                                          1.0626232073355835, 2, False),
    "markus93_densenet40_c10": (10000, 5000, 9242, 0.009060055383371674, 0.055002702432305275,
                                2.8825607120758066, 2, True),
    "netcal_densenetbc100c100": (8000, 2000, 6041, 0.06977452672765758, 0.1409749698165089,
                                 2.1345539627022574, 6, False),
    "sctl_cifar10lt_resnet110": (10000, 10216, 7597, 0.08448652641187204, 0.19137789035327105,
                                 3.4451925850664686, 1, True),
    "lspair_alpha0": (6000, 3000, 5064, 0.03531696341497957, 0.09291560044782807, 2.2842650046153365, 2, True),
    "lspair_alpha0.05": (6000, 3000, 5113, 0.03834160460781302, 0.014603516285507906, 0.9199637266680024, 1, False),
    "lspair_alpha0.1": (6000, 3000, 5124, 0.039630550943877386, 0.061206281051607345, 0.7941598793971862, 2, False),
    "lspair_alpha0.2": (6000, 3000, 5163, 0.03756342802118396, 0.151740938838933, 0.648336740742912, 2, False),
}


def read_split(name):
    table = pq.read_table(SAMPLES / f"{name}.parquet")
    logits = np.stack(table.column("logits").to_numpy(zero_copy_only=False)).astype(np.float64)
    labels = table.column("label").to_numpy()
    split = np.asarray(table.column("split").to_pylist())
    return (logits[split == "test"], labels[split == "test"]), (logits[split == "val"], labels[split == "val"])


@pytest.fixture(scope="module")
def results():
    return {name: selcal.evaluate(SAMPLES / f"{name}.parquet").models[0] for name in PINNED}


def test_every_sample_file_is_pinned():
    assert sorted(p.stem for p in SAMPLES.glob("*.parquet")) == sorted(PINNED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PINNED))
def test_pinned_figures(results, name):
    n_eval, n_val, n_correct, aurc, ece, temperature, p, fallback = PINNED[name]
    model = results[name]
    assert (model.n_eval, model.n_val, model.split) == (n_eval, n_val, "split-column")
    assert model.accuracy == n_correct / n_eval
    assert model.scores["msp"]["aurc"] == pytest.approx(aurc, rel=1e-12, abs=0)
    assert model.scores["msp"]["ece"] == pytest.approx(ece, rel=1e-12, abs=0)
    assert model.scores["temp"]["temperature"] == pytest.approx(temperature, rel=1e-10, abs=0)
    assert (model.scores["pnorm"]["p"], model.scores["pnorm"]["fallback"]) == (p, fallback)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PINNED))
def test_pinned_figures_agree_with_independent_references(name):
    n_eval, n_val, n_correct, aurc, ece, temperature, _, _ = PINNED[name]
    (test_logits, test_labels), (val_logits, val_labels) = read_split(name)
    assert (len(test_labels), len(val_labels)) == (n_eval, n_val)
    correct = test_logits.argmax(axis=1) == test_labels
    assert int(correct.sum()) == n_correct
    # AURC of MSP: ties expanded by a plain loop, MSP ranked by S (no saturation).
    assert ref_posthoc.brute_aurc(ref_posthoc.msp_rank_score(test_logits), correct) == pytest.approx(aurc, rel=1e-12)
    # ECE of MSP by the explicit bin loop.
    confidence = ref_calibration.softmax64(test_logits).max(axis=1)
    assert ref_calibration.ece(confidence, correct, 15) == pytest.approx(ece, rel=1e-9)
    # T by a grid and a bounded scalar search over the validation NLL.
    reference_t, _ = ref_posthoc.reference_temperature(val_logits, val_labels)
    assert temperature == pytest.approx(reference_t, rel=1e-6)


@pytest.mark.slow
def test_densenet40_matches_the_published_calibration_errors(results):
    """Guo et al. (2017), table 1, DenseNet 40 on CIFAR-10: ECE 5.50% uncalibrated, 0.95% with
    temperature scaling (15 bins). The published figures have two decimals."""
    model = results["markus93_densenet40_c10"]
    assert round(100 * model.scores["msp"]["ece"], 2) == 5.50
    assert round(100 * model.scores["temp"]["ece"], 2) == 0.95


def test_label_smoothing_degrades_msp_ranking_and_pnorm_recovers_it(results):
    """The pair shipped to show Xia et al.'s effect: LS lowers the error rate but raises MSP's AURC;
    the p-norm score (fitted on validation) brings the LS model's AURC below the CE model's."""
    ce, ls = results["lspair_alpha0"], results["lspair_alpha0.1"]
    assert ls.error < ce.error
    assert ls.scores["msp"]["aurc"] > ce.scores["msp"]["aurc"]
    assert ls.scores["pnorm"]["aurc"] < ce.scores["msp"]["aurc"]
    assert math.isclose(ce.scores["pnorm"]["aurc"], ce.scores["msp"]["aurc"])  # CE: falls back to MSP
