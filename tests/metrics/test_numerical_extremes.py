"""Numerical extremes, checked against exact references (CONVENTIONS.md, all sections).

Every expected number is computed without floating point wherever rounding could matter:
softmax sums, log-MSP, NLL and Brier in ``decimal`` at 100 digits (with an exponent range
wide enough that exp(-1e30) is an exact 0 and exp(-2000) is not lost), rates, areas and
binned errors in ``fractions`` (``ref_selective`` / ``ref_calibration``, the brute-force
references of the other test modules). No float128.

Cases: logits of magnitude 1e4 and 1e30 (every metric finite and right); K = 2 and K = 1
(one binary logit: the same numbers as the two-column file (0, v)); K = 100 000 with a
few rows; N = 1; every prediction correct; every prediction wrong; every score tied;
classes never predicted (one never labelled either); float16 overflow refused naming the
row (and float16's largest value accepted); logits near float64's largest value;
byte-identical JSON for any chunk size, worker count and reader (streamed or not).
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from helpers import (
    assert_refused,  # noqa: E402
    check_bounds,  # noqa: E402
)
from oracles import ref_calibration as refcal
from oracles import ref_selective as refsel

import selcal  # noqa: E402
from selcal.api import evaluate as evaluate_function  # noqa: E402

DIGITS = 100
BINS = 15
REL = 1e-12
FAST = ("--scores", "msp,max_logit")  # nothing fitted: every row is evaluated
ALL_SCORES = {"msp", "max_logit", "pnorm", "temp"}


# ====================================================================== exact reference
def _context(ctx):
    ctx.prec = DIGITS
    ctx.Emin = -(10**15)  # exp(-1e30) underflows quietly to an exact 0
    ctx.Emax = 10**15
    return ctx


def _log1p(s: Decimal) -> Decimal:
    """ln(1 + s), keeping s when it is far below 10**-DIGITS."""
    if s < Decimal("1e-40"):
        return s - s * s / 2 + s * s * s / 3
    return (1 + s).ln()


def exact_rows(logits, labels) -> list[dict]:
    """Per row, exactly: prediction (first index on ties), S = sum_{k != pred} exp(v_k - v_max),
    log-MSP and MSP rounded once to float64, NLL and Brier terms (decimal), and a function
    giving p_k. Rows are summed value by value (np.unique), so K = 100 000 costs little."""
    logits = np.asarray(logits, dtype=np.float64)
    rows = []
    with localcontext() as ctx:
        _context(ctx)
        for v, y in zip(logits, np.asarray(labels, dtype=np.int64)):
            y = int(y)
            pred = refcal.argmax_first(v) if v.size <= 1000 else int(np.argmax(v))  # numpy: first on ties too
            top = Decimal(float(v[pred]))
            values, counts = np.unique(v, return_counts=True)
            exps = {float(value): (Decimal(float(value)) - top).exp() for value in values}
            s = s2 = Decimal(0)
            for value, count in zip(values, counts):
                count = int(count) - (1 if value == v[pred] else 0)
                e = exps[float(value)]
                s += count * e
                s2 += count * e * e
            denominator = 1 + s
            e_y = Decimal(0) if y == pred else exps[float(v[y])]
            if y == pred:  # sum_k (p_k - [y = k])^2 without cancellation: (1 - p_pred) = S / (1 + S)
                brier = (s * s + s2) / (denominator * denominator)
            else:
                brier = (1 + (denominator - e_y) ** 2 + (s2 - e_y * e_y)) / (denominator * denominator)
            rows.append({
                "pred": pred, "correct": pred == y, "label": y,
                "log_msp": float(-_log1p(s)), "msp": float(1 / denominator),
                "nll": (top - Decimal(float(v[y]))) + _log1p(s), "brier": brier,
                "max_logit": float(v[pred]),
                "p": (lambda k, v=v, pred=pred, exps=exps, d=denominator:
                      float(1 / d) if k == pred else float(exps[float(v[k])] / d)),
                "p_exact": (lambda k, v=v, pred=pred, exps=exps, d=denominator:
                            1 / d if k == pred else exps[float(v[k])] / d),
            })
    for row in rows:  # a confidence within an ulp of a bin edge would be binned by rounding, not by definition
        for b in range(1, BINS):
            assert abs(row["msp"] - b / BINS) > 1e-12, f"test data: MSP {row['msp']!r} sits on the bin edge {b}/{BINS}"
    return rows


def classwise_ece(rows, n_classes: int) -> float:
    """Mean over all K classes of the 15-bin ECE of p_k against [y = k].

    For K <= 64 literally (ref_calibration.classwise_ece on the float64 probabilities). For
    larger K the classes nobody is labelled with are summed in closed form: with no hits
    every bin's gap is its confidence sum, so their ECE is sum_i p_ik / N whatever the bins.
    """
    labels = [r["label"] for r in rows]
    n = len(rows)
    if n_classes <= 64:
        probabilities = np.array([[r["p"](k) for k in range(n_classes)] for r in rows])
        return refcal.classwise_ece(probabilities, labels, BINS)
    labelled = sorted(set(labels))
    total = Fraction(0)
    for k in labelled:
        total += refcal.ece_exact([r["p"](k) for r in rows], [int(y == k) for y in labels], BINS)
    with localcontext() as ctx:
        _context(ctx)
        rest = sum((1 - sum((r["p_exact"](k) for k in labelled), Decimal(0)) for r in rows), Decimal(0)) / n
    return float((total + Fraction(rest)) / n_classes)


def reference(logits, labels, n_classes: int | None = None) -> dict:
    """Every number of the JSON for the scores msp and max_logit, all rows evaluated."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.shape[1] == 1:  # one binary logit v is the two-class row (0, v)
        logits = np.concatenate([np.zeros_like(logits), logits], axis=1)
    rows = exact_rows(logits, labels)
    n = len(rows)
    correct = [r["correct"] for r in rows]
    with localcontext() as ctx:
        _context(ctx)
        nll = sum((r["nll"] for r in rows), Decimal(0)) / n
        brier = sum((r["brier"] for r in rows), Decimal(0)) / n
    confidence = [r["msp"] for r in rows]
    msp = refsel.selective_metrics_reference([r["log_msp"] for r in rows], correct)
    msp.update(ece=refcal.ece_exact(confidence, correct, BINS), aece=refcal.aece_exact(confidence, correct, BINS),
               mce=Fraction(refcal.mce(confidence, correct, BINS)))
    return {
        "accuracy": Fraction(sum(correct), n), "error": Fraction(n - sum(correct), n),
        "nll": float(nll), "brier": float(brier), "cece": classwise_ece(rows, n_classes or logits.shape[1]),
        "scores": {"msp": msp,
                   "max_logit": refsel.selective_metrics_reference([r["max_logit"] for r in rows], correct)},
        "rows": rows,
    }


def assert_matches(model: dict, ref: dict, scores=("msp", "max_logit")):
    """selcal's JSON against the exact reference: NLL and Brier to 1e-12 relative (no absolute slack),
    fractions to 1e-12 relative or 1e-15 absolute, undefined values null."""
    problems = []

    def compare(what, actual, expected, rel=REL, abs_=1e-15):
        if expected is None:
            if actual is not None:
                problems.append(f"{what}: {actual!r}, expected null (undefined)")
            return
        if not isinstance(actual, (int, float)) or isinstance(actual, bool) or not math.isfinite(actual):
            problems.append(f"{what}: {actual!r}, expected {float(expected)!r}")
        elif actual != pytest.approx(float(expected), rel=rel, abs=abs_):
            problems.append(f"{what}: {actual!r}, expected {float(expected)!r}")

    for key in ("accuracy", "error"):
        compare(key, model[key], ref[key])
    compare("nll", model["nll"], ref["nll"], abs_=0.0)
    compare("brier", model["brier"], ref["brier"], abs_=0.0)
    compare("cece", model["cece"], ref["cece"], rel=1e-10)
    for score in scores:
        for key, expected in ref["scores"][score].items():
            compare(f"{score}.{key}", model["scores"][score].get(key, "<missing>"), expected)
    assert not problems, "disagreements with the exact reference:\n  " + "\n  ".join(problems)


# ====================================================================== data
def extreme_logits(scale: float, n: int = 150, k: int = 4, seed: int = 0, dtype=np.float64) -> np.ndarray:
    """Rows at magnitude ``scale`` of three kinds, so that every tie is exact and every gap clear:

    far: integer multiples of ``scale`` (gaps of at least ``scale``; S underflows to 0 beyond ~745);
    near: ``scale`` plus offsets of a few units in steps of 1/8 (all lost at 1e30: a K-way tie);
    mixed: two near ``scale``, the others far below.
    No row has 3 or 5 tied top logits (MSP exactly 1/3 or 1/5 would sit on a bin edge).
    """
    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < n:
        kind = len(rows) % 3
        if kind == 0:
            row = scale * rng.integers(-3, 4, size=k).astype(np.float64)
        elif kind == 1:
            row = scale + np.round(rng.normal(0.0, 2.0, size=k) * 8) / 8
        else:
            row = np.concatenate([scale + np.round(rng.normal(0.0, 2.0, size=2) * 8) / 8,
                                  -scale * rng.integers(1, 4, size=k - 2)])
            rng.shuffle(row)
        row = row.astype(dtype).astype(np.float64)
        if np.count_nonzero(row == row.max()) in (3, 5):
            continue
        rows.append(row)
    return np.array(rows)


def labels_for(logits, accuracy: float = 0.7, seed: int = 1, n_classes: int | None = None) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    n_classes = n_classes or max(logits.shape[1], 2)
    pred = (logits[:, 0] > 0).astype(np.int64) if logits.shape[1] == 1 else np.argmax(logits, axis=1)
    rng = np.random.default_rng(seed)
    wrong = (pred + rng.integers(1, n_classes, size=pred.size)) % n_classes
    return np.where(rng.random(pred.size) < accuracy, pred, wrong).astype(np.int64)


def split_every(n: int, every: int = 3) -> np.ndarray:
    return np.where(np.arange(n) % every == 0, "val", "test")


def fast_model(cli, path, *args) -> dict:
    return cli.json(path, *FAST, *args)["models"][0]


# ====================================================================== magnitudes 1e4 and 1e30
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("scale", [1.0, 1e4, 1e30])
def test_large_logits_against_exact_reference(cli, dumps, dtype, scale):
    logits = extreme_logits(scale, dtype=np.float32 if dtype == "float32" else np.float64)
    labels = labels_for(logits)
    path = dumps.parquet("big_logits.parquet", logits, labels, dtype=dtype)
    model = fast_model(cli, path)
    assert_matches(model, reference(logits, labels))
    # All four scores (pnorm and temp fitted on the split column's val rows): finite and within bounds.
    full = cli.json(dumps.parquet("big_split.parquet", logits, labels, dtype=dtype, split=split_every(len(labels))))
    model = full["models"][0]
    check_bounds(model, ALL_SCORES)
    assert 0 < model["scores"]["temp"]["temperature"] < math.inf


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1.0, 1e4, 1e30])
def test_one_binary_logit_is_the_two_columns_0_v(cli, dumps, h, scale):
    rng = np.random.default_rng(3)
    v = np.concatenate([scale * rng.integers(-2, 3, size=60), np.round(rng.normal(0, 3, size=60) * 8) / 8])
    v = v.astype(np.float64)
    labels = labels_for(v[:, None], accuracy=0.75)
    one = dumps.parquet("one.parquet", v[:, None], labels, dtype="float64")
    two_logits = np.stack([np.zeros_like(v), v], axis=1)
    two = dumps.parquet("two.parquet", two_logits, labels, dtype="float64")
    one_model, two_model = fast_model(cli, one), fast_model(cli, two)
    assert one_model["num_classes"] == two_model["num_classes"] == 2
    assert one_model.get("binary_logit") is True
    h.assert_same_numbers(one_model, two_model, drop=("binary_logit",))
    assert_matches(two_model, reference(two_logits, labels))
    split = split_every(len(labels))
    one_full = cli.json(dumps.parquet("one_s.parquet", v[:, None], labels, dtype="float64", split=split))["models"][0]
    two_full = cli.json(dumps.parquet("two_s.parquet", two_logits, labels, dtype="float64", split=split))["models"][0]
    h.assert_same_numbers(one_full, two_full, drop=("binary_logit",))
    check_bounds(one_full, ALL_SCORES)


@pytest.mark.slow
def test_k_100000_with_a_few_rows(cli, dumps):
    k, n = 100_000, 8
    rng = np.random.default_rng(4)
    grid = np.arange(-24, 25) / 4.0  # 49 values in [-6, 6]
    logits = rng.choice(grid, size=(n, k)).astype(np.float32)
    top_class = rng.integers(0, k, size=n)
    top_value = np.array([9.0, 9.0, 7.5, 40.0, 12.0, 6.5, 9.0, 30.0], dtype=np.float32)
    logits[np.arange(n), top_class] = top_value
    labels = np.array([top_class[0], top_class[1], 17, top_class[3], 99_999, top_class[5], 3, 50_000])
    path = dumps.parquet("wide_k.parquet", logits, labels, layout="fixed_size_list")
    model = fast_model(cli, path)
    assert model["num_classes"] == k
    assert_matches(model, reference(logits, labels, n_classes=k))
    # With every score: 8 validation rows (the split column) and 8 evaluation rows.
    both = np.concatenate([logits, logits[::-1]])
    path = dumps.parquet("wide_k_split.parquet", both, np.concatenate([labels, labels[::-1]]),
                         layout="fixed_size_list", split=["val"] * n + ["test"] * n)
    check_bounds(cli.json(path)["models"][0], ALL_SCORES)


# ====================================================================== N = 1
SINGLE_ROWS = {
    "correct": ([[2.0, -1.0, 0.5]], [0]),
    "wrong": ([[2.0, -1.0, 0.5]], [2]),
    "1e30 wrong": ([[1e30, -1e30, 0.0]], [1]),
    "1e4 correct": ([[-1e4, 1e4, 1e4 - 2.5]], [1]),
    "binary": ([[-3.25]], [1]),
}


@pytest.mark.parametrize("name", sorted(SINGLE_ROWS))
def test_single_row(cli, dumps, name):
    logits, labels = np.array(SINGLE_ROWS[name][0], dtype=np.float64), np.array(SINGLE_ROWS[name][1])
    path = dumps.parquet("one_row.parquet", logits, labels, dtype="float64")
    model = fast_model(cli, path)
    assert model["n_eval"] == 1
    assert_matches(model, reference(logits, labels))
    # Every score, fitted on a --val file of one row: once a right prediction, once a wrong one.
    pred = int(labels_for(logits, accuracy=1.0)[0])
    for val_label in (pred, (pred + 1) % max(logits.shape[1], 2)):
        val = dumps.parquet(f"one_val_{val_label}.parquet", logits, np.array([val_label]), dtype="float64")
        full = cli.json(path, "--val", val)["models"][0]
        assert (full["n_eval"], full["n_val"]) == (1, 1)
        check_bounds(full, ALL_SCORES)


# ====================================================================== all correct, all wrong
@pytest.mark.parametrize("scale", [1.0, 1e4, 1e30])
@pytest.mark.parametrize("kind", ["every prediction correct", "every prediction wrong"])
def test_every_prediction_correct_or_wrong(cli, dumps, kind, scale):
    logits = extreme_logits(scale, n=90, seed=5)
    labels = labels_for(logits, accuracy=1.0 if kind.endswith("correct") else 0.0)
    model = fast_model(cli, dumps.parquet("m.parquet", logits, labels, dtype="float64"))
    ref = reference(logits, labels)
    assert_matches(model, ref)
    n = len(labels)
    for score in ("msp", "max_logit"):
        metrics = model["scores"][score]
        assert metrics["auroc"] is None and metrics["fpr95"] is None, metrics
        if kind.endswith("correct"):
            assert (metrics["aurc"], metrics["eaurc"], metrics["augrc"]) == (0.0, 0.0, 0.0), metrics
            assert all(metrics[f"cov@{r:g}"] == 1.0 for r in (0.01, 0.05, 0.1)), metrics
            assert all(metrics[f"risk@{c:g}"] == 0.0 for c in (0.5, 0.8, 0.9)), metrics
        else:
            assert metrics["aurc"] == pytest.approx(1.0, rel=REL) and abs(metrics["eaurc"]) < 1e-15, metrics
            assert metrics["augrc"] == pytest.approx((n + 1) / (2 * n), rel=REL), metrics
            assert all(metrics[f"cov@{r:g}"] == 0.0 for r in (0.01, 0.05, 0.1)), metrics
            assert all(metrics[f"risk@{c:g}"] == 1.0 for c in (0.5, 0.8, 0.9)), metrics
    full = cli.json(dumps.parquet("s.parquet", logits, labels, dtype="float64", split=split_every(n)))["models"][0]
    check_bounds(full, ALL_SCORES)
    if kind.endswith("correct"):  # no minimiser of the validation NLL: T = 1 kept, and said so
        temp = full["scores"]["temp"]
        assert temp["temperature"] == 1.0 and temp["temperature_fallback"] == "no validation errors", temp


# ====================================================================== every score tied
@pytest.mark.parametrize("a", [3.0, 1e4, 1e30])
def test_every_score_tied_binary_rows_and_exact_temperature(cli, dumps, a):
    """40 identical rows (0, a), 80 % labelled 1 in both halves of the split.

    Every score ties, so every selective metric is that of one tie group; and the validation
    NLL of softmax(v / T) is minimised where sigmoid(a / T) = 0.8, i.e. T = a / ln 4 exactly.
    """
    n = 40
    logits = np.tile([0.0, a], (n, 1))
    labels = np.array(([1, 1, 1, 1, 0] * 8), dtype=np.int64)
    split = np.array(["val", "test"] * (n // 2))
    assert labels[split == "val"].mean() == labels[split == "test"].mean() == 0.8
    model = fast_model(cli, dumps.parquet("tied.parquet", logits, labels, dtype="float64"))
    assert_matches(model, reference(logits, labels))
    full = cli.json(dumps.parquet("tied_split.parquet", logits, labels, dtype="float64", split=split))["models"][0]
    check_bounds(full, ALL_SCORES)
    test_rows = split == "test"
    tied = refsel.selective_metrics_reference([0.0] * int(test_rows.sum()), list(labels[test_rows] == 1))
    for score in ("msp", "max_logit", "pnorm", "temp"):
        for key, expected in tied.items():
            assert full["scores"][score][key] == pytest.approx(float(expected), rel=REL, abs=1e-15), (score, key)
    temp = full["scores"]["temp"]
    assert temp["temperature_fallback"] is None, temp
    assert temp["temperature"] == pytest.approx(a / math.log(4.0), rel=1e-8), (temp["temperature"], a / math.log(4))
    assert temp["ece"] == pytest.approx(0.0, abs=1e-9), temp  # sigmoid(a / T) = 0.8 = the accuracy
    assert full["scores"]["pnorm"]["fallback"] is True  # every p ties with MSP on validation


@pytest.mark.slow
def test_every_score_tied_permuted_rows(cli, dumps):
    """Every row a permutation of (1.5, -0.25, 0.75, -2): the same confidence for every score."""
    base = np.array([1.5, -0.25, 0.75, -2.0])
    rng = np.random.default_rng(6)
    logits = np.array([rng.permutation(base) for _ in range(60)])
    labels = labels_for(logits, accuracy=0.6, seed=7)
    model = fast_model(cli, dumps.parquet("perm.parquet", logits, labels, dtype="float64"))
    ref = reference(logits, labels)
    assert len({r["log_msp"] for r in ref["rows"]}) == 1
    assert_matches(model, ref)
    split = split_every(60, 2)
    full = cli.json(dumps.parquet("perm_split.parquet", logits, labels, dtype="float64", split=split))["models"][0]
    check_bounds(full, ALL_SCORES)
    test_rows = split == "test"
    correct = list(np.argmax(logits[test_rows], axis=1) == labels[test_rows])
    tied = refsel.selective_metrics_reference([0.0] * len(correct), correct)
    for score in ("msp", "max_logit", "pnorm", "temp"):
        for key, expected in tied.items():
            actual = full["scores"][score][key]
            assert actual == (None if expected is None else pytest.approx(float(expected), rel=REL, abs=1e-15)), (
                score, key, actual, expected)


# ====================================================================== classes never predicted
@pytest.mark.slow
def test_classes_never_predicted(cli, dumps):
    """K = 10: only classes 0-2 are ever predicted; 7-9 are labelled, never predicted; 5 neither."""
    rng = np.random.default_rng(8)
    n, k = 200, 10
    logits = np.round(rng.normal(0, 1.5, size=(n, k)) * 8) / 8
    logits[np.arange(n), rng.integers(0, 3, size=n)] += 8.0
    pred = np.argmax(logits, axis=1)
    assert set(pred.tolist()) <= {0, 1, 2}
    others = np.array([0, 1, 2, 3, 4, 6, 7, 8, 9])
    labels = np.where(rng.random(n) < 0.5, pred, rng.choice(others, size=n)).astype(np.int64)
    assert {7, 8, 9} <= set(labels.tolist()) and 5 not in labels
    model = fast_model(cli, dumps.parquet("unpredicted.parquet", logits, labels, dtype="float64"))
    assert model["num_classes"] == k
    assert_matches(model, reference(logits, labels))


# ====================================================================== float16
FLOAT16_CASES = {
    # name: (n, k, layout, row, column index, value)
    "list, row 0": (50, 4, "list", 0, 2, 7e4),
    "large_list, last row, -inf": (50, 4, "large_list", 49, 0, -1e5),
    "fixed_size_list, second read batch": (70_000, 4, "fixed_size_list", 66_000, 3, 65520.0),
    "wide": (50, 3, "wide", 31, 1, -7e4),
    "one binary logit": (50, 1, "list", 17, 0, 7e4),
}


@pytest.mark.parametrize("reading", ["in-memory", "streamed"])
@pytest.mark.parametrize("case", sorted(FLOAT16_CASES))
def test_float16_overflow_is_refused_naming_the_row(cli, dumps, h, out_dir, case, reading):
    n, k, layout, row, column, value = FLOAT16_CASES[case]
    logits, labels = h.make_data(n=n, k=max(k, 2), seed=9)
    logits = logits[:, :k].copy()
    labels = labels_for(logits, seed=9)
    logits[row, column] = value  # above 65504: inf once stored as float16
    with np.errstate(over="ignore"):
        path = dumps.parquet("f16.parquet", logits, labels, layout=layout, dtype="float16")
    with pytest.MonkeyPatch.context() as patch:
        if reading == "streamed":
            patch.setitem(evaluate_function.__kwdefaults__, "memory_budget", 0)
        result = cli("evaluate", path, "--json", out_dir / "r.json")
    assert_refused(result, [str(path), f"logit_{column}" if layout == "wide" else "logits", "float16"], row)
    assert list(out_dir.iterdir()) == []


def test_float16_largest_value_is_accepted(cli, dumps):
    logits = np.array([[65504.0, -65504.0, 0.0], [-65504.0, 65504.0, 65504.0], [0.0, 0.0, -65504.0],
                       [65504.0, 65472.0, -1.0], [1.0, -65504.0, 65503.5 - 0.5]] * 6)
    labels = labels_for(logits, accuracy=0.6, seed=10)
    model = fast_model(cli, dumps.parquet("f16max.parquet", logits, labels, dtype="float16"))
    assert_matches(model, reference(logits.astype(np.float16), labels))


# ====================================================================== near float64's largest value
@pytest.mark.parametrize("scale", [1e300, 1e307])
def test_logits_near_the_largest_float64(cli, dumps, h, scale):
    """Finite float64 logits are valid input (only NaN/inf are refused); all arithmetic is float64.

    Here v_max - v_k, (v_k - v_max)^2 and the row sums leave float64's range: the metrics
    must still be finite and right, and T of the exact binary case a / ln 4 (see
    test_every_score_tied_binary_rows_and_exact_temperature).
    """
    logits = extreme_logits(scale, n=90, seed=11)
    labels = labels_for(logits, seed=11)
    path = dumps.parquet("huge.parquet", logits, labels, dtype="float64")

    def run(*args) -> dict:
        result = cli("evaluate", *args, "--json", "-")
        assert result.exit_code == 0 and result.exception is None, (
            f"exit {result.exit_code}, {type(result.exception).__name__}: {result.exception}; "
            f"stderr: {result.stderr!r}")
        return h.strict_json(result.stdout)["models"][0]

    assert_matches(run(path, *FAST), reference(logits, labels))
    split = split_every(len(labels))
    check_bounds(run(dumps.parquet("huge_split.parquet", logits, labels, dtype="float64", split=split)), ALL_SCORES)
    tied = dumps.parquet("huge_tied.parquet", np.tile([0.0, scale], (40, 1)),
                         np.array([1, 1, 1, 1, 0] * 8), dtype="float64", split=["val", "test"] * 20)
    temp = run(tied)["scores"]["temp"]
    assert temp["temperature"] == pytest.approx(scale / math.log(4.0), rel=1e-8), (temp["temperature"],
                                                                                  scale / math.log(4.0))


# ====================================================================== determinism
def _determinism_data(kind: str, dumps, h):
    """(test path, val path or None, extra keyword arguments of selcal.evaluate)."""
    if kind == "float32 ties, hold-out":
        logits, labels = h.make_data(n=1500, k=6, seed=12)
        return dumps.parquet("ties.parquet", logits, labels, dtype="float32"), None, {}
    if kind == "one float16 binary logit, split column":
        logits, labels = h.make_data(n=1200, k=2, seed=13)
        v = logits[:, 1:] - logits[:, :1]
        labels = labels_for(v, seed=13)
        return dumps.parquet("binary.parquet", v, labels, dtype="float16", split=split_every(1200, 4)), None, {}
    if kind == "K = 70 with a --val file":
        rng = np.random.default_rng(14)
        logits = rng.normal(0, 3, size=(1000, 70)).astype(np.float32)
        val = rng.normal(0, 3, size=(400, 70)).astype(np.float32)
        test_path = dumps.parquet("k70.parquet", logits, labels_for(logits, seed=14), layout="wide")
        return test_path, dumps.parquet("k70_val.parquet", val, labels_for(val, seed=15)), {}
    if kind == "1e30 logits, ignored rows":
        logits = extreme_logits(1e30, n=900, seed=16)
        labels = labels_for(logits, seed=16)
        labels[::7] = 255
        return dumps.parquet("ignored.parquet", logits, labels, dtype="float64"), None, {"ignore_label": 255}
    raise ValueError(kind)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["float32 ties, hold-out", "one float16 binary logit, split column",
                                  "K = 70 with a --val file", "1e30 logits, ignored rows"])
def test_same_json_bytes_for_any_chunking_threads_and_reader(dumps, h, kind):
    path, val, extra = _determinism_data(kind, dumps, h)
    reference_bytes = selcal.evaluate(str(path), val and str(val), **extra).to_json()
    differences = []
    for chunk_rows, workers, stream in itertools.product([None, 1, 7, 256, 5000], [1, 3], [False, True]):
        text = selcal.evaluate(str(path), val and str(val), chunk_rows=chunk_rows, workers=workers, stream=stream,
                               **extra).to_json()
        if text != reference_bytes:
            differences.append(f"chunk_rows={chunk_rows} workers={workers} stream={stream}")
    assert not differences, "JSON differs from the default run for: " + "; ".join(differences)
