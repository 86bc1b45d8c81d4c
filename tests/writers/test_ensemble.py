"""``selcal ensemble``: logits log(mean_m softmax(v_m)), mutual information H(mean p) - mean_m H(p_m),
disagreement = fraction of members whose argmax differs from the ensemble's; rows aligned by id,
else by order with identical labels."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import one_error_line, write_parquet

import selcal
from selcal.errors import SelcalError
from selcal.writers.ensemble import ensemble


def members(n=120, k=5, m=3, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(0, 2, size=(n, k))
    logits = [base + rng.normal(0, 1.5, size=(n, k)) * (j + 1) for j in range(m)]
    labels = np.where(rng.random(n) < 0.7, base.argmax(axis=1), rng.integers(0, k, n))
    return logits, labels


def reference(logits):
    """Mean probability, MI and disagreement, one row and one member at a time."""
    n, k = logits[0].shape
    mean_p, mi, disagreement = np.empty((n, k)), np.empty(n), np.empty(n)
    for i in range(n):
        ps = []
        for v in logits:
            e = np.exp(v[i] - v[i].max())
            ps.append(e / e.sum())
        p = sum(ps) / len(ps)
        entropy = lambda q: -sum(x * np.log(x) for x in q if x > 0)  # noqa: E731
        mean_p[i] = p
        mi[i] = entropy(p) - sum(entropy(q) for q in ps) / len(ps)
        disagreement[i] = np.mean([np.argmax(v[i]) != np.argmax(p) for v in logits])
    return mean_p, mi, disagreement


def read(path):
    table = pq.read_table(path)
    logits = np.stack(table.column("logits").to_numpy(zero_copy_only=False))
    return table, logits


def test_the_ensemble_matches_a_loop_over_rows_and_members(dumps):
    logits, labels = members()
    paths = [dumps.npz(f"m{j}.npz", v, labels, dtype="float64") for j, v in enumerate(logits)]
    out = dumps.path("ens.parquet")
    summary = ensemble(paths, out)
    assert summary.aligned_by == "order" and summary.n_rows == 120
    table, ens_logits = read(out)
    mean_p, mi, disagreement = reference(logits)
    probabilities = np.exp(ens_logits - ens_logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities, mean_p, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.exp(ens_logits).sum(axis=1), 1.0, rtol=1e-13)  # log-probabilities
    np.testing.assert_allclose(table.column("mutual_information").to_numpy(), mi, rtol=1e-9, atol=1e-13)
    assert table.column("disagreement").to_numpy().tolist() == disagreement.tolist()
    assert table.column("label").to_numpy().tolist() == labels.tolist()
    metadata = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    assert json.loads(metadata["selcal.ensemble"])["members"] == [str(p) for p in paths]
    assert metadata["selcal.logits"] == "log-probabilities"


def test_a_hand_worked_two_member_row(dumps):
    # member 1: p = (1/2, 1/2); member 2: p = (1, 0) up to exp(-40): mean (3/4, 1/4)
    a = dumps.npz("a.npz", np.array([[0.0, 0.0]]), np.array([0]), dtype="float64")
    b = dumps.npz("b.npz", np.array([[40.0, 0.0]]), np.array([0]), dtype="float64")
    out = dumps.path("ens.parquet")
    ensemble([a, b], out)
    table, logits = read(out)
    np.testing.assert_allclose(np.exp(logits[0]), [0.75, 0.25], rtol=1e-12)
    h = lambda *p: -sum(x * np.log(x) for x in p)  # noqa: E731
    assert table.column("mutual_information")[0].as_py() == pytest.approx(h(0.75, 0.25) - h(0.5, 0.5) / 2, rel=1e-9)
    assert table.column("disagreement")[0].as_py() == 0.0  # argmax of both is class 0 (first on the tie)


def test_alignment_by_id_does_not_depend_on_member_row_order(dumps):
    logits, labels = members(seed=1)
    n = labels.size
    ids = pa.array([f"img{i:04d}" for i in range(n)])
    shuffle = np.random.default_rng(2).permutation(n)
    plain = [dumps.parquet(f"p{j}.parquet", v, labels, dtype="float64", extra={"id": ids})
             for j, v in enumerate(logits)]
    shuffled = [plain[0]] + [
        dumps.parquet(f"s{j}.parquet", v[shuffle], labels[shuffle], dtype="float64",
                      extra={"id": ids.take(pa.array(shuffle))})
        for j, v in enumerate(logits[1:], start=1)]
    a, b = dumps.path("a.parquet"), dumps.path("b.parquet")
    assert ensemble(plain, a).aligned_by == "id"
    ensemble(shuffled, b)
    assert pq.read_table(a).drop(["id"]).equals(pq.read_table(b).drop(["id"]))
    assert pq.read_table(a).column("id").to_pylist() == ids.to_pylist()


def test_split_and_ids_are_carried_and_evaluate_knows_log_probabilities(dumps):
    logits, labels = members(n=300, seed=3)
    split = np.where(np.arange(300) % 5 == 0, "val", "test")
    paths = [dumps.parquet(f"m{j}.parquet", v, labels, split=split) for j, v in enumerate(logits)]
    out = dumps.path("ens.parquet")
    ensemble(paths, out)
    assert pq.read_table(out).column("split").to_pylist() == split.tolist()
    model = selcal.evaluate(out, uncertainty_cols=("mutual_information",)).models[0]
    assert model.split == "split-column" and model.n_eval == 240
    assert not any("log-probabilities" in w for w in model.warnings)
    assert model.to_dict()["ensemble"]["members"] == [str(p) for p in paths]
    # the same log-probabilities without the ensemble's metadata are warned about
    plain = dumps.parquet("plain.parquet", read(out)[1], labels, split=split, dtype="float64")
    assert any("log-probabilities" in w for w in selcal.evaluate(plain).models[0].warnings)


@pytest.mark.parametrize("case, message", [
    ("labels", "column 'label', row 7: label"),
    ("rows", "has 119 rows but"),
    ("classes", "has K = 4 classes but"),
    ("one", "an ensemble needs at least two dumps"),
    ("ids", "column 'id', row 0: id 'x0' is not in"),
    ("mixed", "has no 'id' column but another member has"),
])
def test_members_that_do_not_match_are_refused_in_one_line(cli, dumps, case, message):
    logits, labels = members(n=120, seed=4)
    a = dumps.parquet("a.parquet", logits[0], labels)
    other_labels = labels.copy()
    other_labels[7] = (labels[7] + 1) % 5
    b = {
        "labels": lambda: dumps.parquet("b.parquet", logits[1], other_labels),
        "rows": lambda: dumps.parquet("b.parquet", logits[1][:119], labels[:119]),
        "classes": lambda: dumps.parquet("b.parquet", logits[1][:, :4], labels % 4),
        "one": lambda: None,
        "ids": lambda: dumps.parquet("b.parquet", logits[1], labels, extra={"id": pa.array([f"x{i}" for i in range(120)])}),
        "mixed": lambda: dumps.parquet("b.parquet", logits[1], labels, extra={"id": pa.array([str(i) for i in range(120)])}),
    }[case]()
    if case == "ids":
        a = dumps.parquet("a.parquet", logits[0], labels, extra={"id": pa.array([str(i) for i in range(120)])})
    out = dumps.path("ens.parquet")
    result = cli("ensemble", a, *([b] if b else []), "--out", out)
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: ") and message in lines[0], lines
    assert not out.exists() and not list(out.parent.glob(".ens.parquet.*"))


def test_cli_ensemble_then_evaluate(cli, dumps):
    logits, labels = members(n=200, seed=5)
    paths = [dumps.npz(f"m{j}.npz", v, labels) for j, v in enumerate(logits)]
    out = dumps.path("ens.parquet")
    result = cli("ensemble", *paths, "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "200 rows, K = 5, 3 members aligned by order" in result.stderr
    report = cli.json(out, "--scores", "msp,entropy", "--uncertainty-col", "mutual_information")
    assert set(report["models"][0]["scores"]) == {"msp", "entropy", "mutual_information"}
    with pytest.raises(SelcalError, match="is one of the members"):
        ensemble([paths[0], out], out)


def test_duplicate_ids_are_refused(cli, dumps):
    logits, labels = members(n=10, seed=6)
    ids = pa.array(["a", "b", "c", "d", "e", "f", "g", "h", "i", "i"])
    a = dumps.parquet("a.parquet", logits[0], labels, extra={"id": pa.array(list("abcdefghij"))})
    b = dumps.parquet("b.parquet", logits[1], labels, extra={"id": ids})
    result = cli("ensemble", a, b, "--out", dumps.path("ens.parquet"))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"selcal: error: {b}: column 'id', row 9: id 'i' also at row 8; every row needs its own id"


@pytest.mark.slow
def test_memory_does_not_grow_with_the_number_of_members(dumps):
    """Members are read one after another: eight members take about the memory of two."""
    import tracemalloc

    n, k = 4000, 200  # one member: 3.2 MB of float32 logits, 6.4 MB as float64
    rng = np.random.default_rng(7)
    labels = rng.integers(0, k, n)
    paths = [dumps.npz(f"m{j}.npz", rng.normal(size=(n, k)).astype(np.float32), labels) for j in range(8)]

    def peak(members):
        tracemalloc.start()
        ensemble(members, dumps.path(f"ens{len(members)}.parquet"))
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    two, eight = peak(paths[:2]), peak(paths)
    assert eight < two + 2 * n * k * 4, (two, eight)  # not six more members' logits


def test_ensemble_members_that_disagree_on_a_split_are_refused(tmp_path, cli):
    n = 200
    split = np.where(np.arange(n) % 4 == 0, "val", "test")
    other = split.copy()
    other[7] = "val"  # row id 7: test in the first member, val in the second
    a = write_parquet(tmp_path / "a.parquet", n=n, extra={"split": pa.array(split), "id": pa.array(np.arange(n))})
    b = write_parquet(tmp_path / "b.parquet", n=n, extra={"split": pa.array(other), "id": pa.array(np.arange(n))})
    pq.write_table(pq.read_table(b).take(np.arange(n)[::-1]), b)  # another row order: aligned by id
    line = one_error_line(cli("ensemble", a, b, "--out", tmp_path / "ens.parquet"))
    assert "b.parquet" in line and "split" in line and "row 192" in line
    assert not (tmp_path / "ens.parquet").exists()


def test_ensemble_keeps_the_members_id_type(tmp_path, cli):
    n = 100
    ids = pa.array(np.arange(n, dtype=np.int64) * 3)
    a = write_parquet(tmp_path / "a.parquet", n=n, extra={"id": ids})
    b = write_parquet(tmp_path / "b.parquet", n=n, extra={"id": ids})
    result = cli("ensemble", a, b, "--out", tmp_path / "ens.parquet", "-q")
    assert result.exit_code == 0, result.stderr
    column = pq.read_table(tmp_path / "ens.parquet").column("id")
    assert column.type == pa.int64() and column.to_pylist() == ids.to_pylist()
