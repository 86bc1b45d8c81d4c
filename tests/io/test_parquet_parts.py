"""A folder (or a glob) of Parquet parts is one model, with the numbers of the same rows in one file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SAMPLES, write_parquet
from typer.testing import CliRunner

import selcal
from selcal.cli import app

SAMPLE = SAMPLES / "calibrator_cifar10_resnet50_ce.parquet"


def numbers(result) -> dict:
    """The JSON of a result without what names the input (path, model name)."""
    data = json.loads(result.to_json())
    for model in data["models"]:
        model.pop("path")
        model.pop("name")
    return data


def write_parts(folder: Path, table, cuts, order=None, prefix="part-") -> Path:
    folder.mkdir(parents=True)
    pieces = [table.slice(a, b - a) for a, b in zip(cuts, cuts[1:])]
    for i, piece in enumerate(pieces if order is None else [pieces[j] for j in order]):
        pq.write_table(piece, folder / f"{prefix}{i:03d}.parquet")
    return folder


@pytest.fixture(scope="module")
def whole():
    return pq.read_table(SAMPLE), numbers(selcal.evaluate(str(SAMPLE)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parts_give_the_numbers_of_one_file_whatever_the_boundaries_and_order(tmp_path, whole, seed):
    table, expected = whole
    rng = np.random.default_rng(seed)
    shuffled = table.take(rng.permutation(table.num_rows))
    inner = sorted(rng.choice(np.arange(1, table.num_rows), size=int(rng.integers(1, 6)), replace=False).tolist())
    cuts = [0, *inner, table.num_rows]
    order = rng.permutation(len(cuts) - 1).tolist()
    folder = write_parts(tmp_path / "resnet50", shuffled, cuts, order)
    (folder / "_SUCCESS").write_text("")  # Spark's marker: ignored
    (folder / ".part-9.parquet.crc").write_text("x")  # hidden: ignored
    for stream in (False, True):
        assert numbers(selcal.evaluate(str(folder), stream=stream)) == expected
    assert numbers(selcal.evaluate(str(folder / "part-*.parquet"))) == expected


@pytest.mark.slow
def test_a_part_of_no_rows_and_nested_folders_are_read(tmp_path, whole):
    table, expected = whole
    folder = tmp_path / "m"
    write_parts(folder / "a", table, [0, 0, 4000])
    write_parts(folder / "b", table, [4000, table.num_rows])
    assert numbers(selcal.evaluate(str(folder))) == expected


@pytest.mark.slow
def test_model_is_named_after_its_folder(tmp_path, whole):
    table, _ = whole
    folder = write_parts(tmp_path / "dumps" / "resnet50.a1_in1k", table, [0, 5000, table.num_rows])
    assert selcal.evaluate(str(folder)).models[0].name == "resnet50.a1_in1k"
    assert selcal.evaluate(str(folder) + "/").models[0].name == "resnet50.a1_in1k"
    assert selcal.evaluate(str(folder / "part-*.parquet")).models[0].name == "resnet50.a1_in1k"


def one_error(args) -> str:
    result = CliRunner().invoke(app, ["evaluate", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_parts_that_disagree_are_refused_naming_the_part(tmp_path, whole):
    table, _ = whole
    folder = write_parts(tmp_path / "m", table, [0, 100, 200])
    pq.write_table(table.slice(200, 10).drop_columns(["split"]), folder / "part-zzz.parquet")
    line = one_error([str(folder)])
    assert "part-zzz.parquet" in line and "same columns" in line


def test_a_bad_row_is_named_by_part_and_row_within_it(tmp_path, whole):
    table, _ = whole
    folder = write_parts(tmp_path / "m", table, [0, 100, 200])
    labels = table.column("label").to_numpy().copy()
    labels[107] = 99
    bad = table.set_column(table.schema.get_field_index("label"), "label", [labels])
    pq.write_table(bad.slice(100, 100), folder / "part-001.parquet")
    line = one_error([str(folder)])
    assert "part-001.parquet" in line and "row 7" in line and "label 99" in line


def test_empty_folder_and_unmatched_glob_are_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    assert "no dump in it" in one_error([str(tmp_path / "empty")])
    assert "matches no Parquet file" in one_error([str(tmp_path / "nothing-*.parquet")])


def test_ids_shared_by_two_parts_are_duplicates(tmp_path, whole):
    table, _ = whole
    import pyarrow as pa

    ids = pa.array([str(i % 150) for i in range(table.num_rows)])
    with_ids = table.set_column(table.schema.get_field_index("id"), "id", ids)
    folder = write_parts(tmp_path / "m", with_ids, [0, 150, 300])
    assert "also at row" in one_error([str(folder)])


def test_an_output_inside_an_input_folder_is_refused_before_the_work(tmp_path, whole):
    table, _ = whole
    folder = write_parts(tmp_path / "m", table, [0, 100, 200])
    for option, name in (("--json", "r.json"), ("--report", "r.parquet"), ("--csv", "sub/b.csv")):
        line = one_error([str(folder), option, str(folder / name)])
        assert "inside the input folder" in line
        assert sorted(p.name for p in folder.rglob("*")) == ["part-000.parquet", "part-001.parquet"]
    result = CliRunner().invoke(app, ["evaluate", str(folder), "--json", str(tmp_path / "r.json"), "-q"])
    assert result.exit_code == 0, result.stderr  # beside the folder is fine


def test_a_part_reached_twice_or_through_a_loop_is_read_once(tmp_path, cli):
    parts = tmp_path / "parts"
    write_parquet(parts / "sub" / "part-0.parquet", n=300)
    write_parquet(parts / "part-1.parquet", n=100, seed=2)
    os.symlink("..", parts / "sub" / "loop")  # parts/sub/loop/sub/loop/... reaches part-0 again and again
    os.symlink("part-1.parquet", parts / "same-as-1.parquet")  # a second name of one part
    os.link(parts / "sub" / "part-0.parquet", parts / "hard-0.parquet")  # and a hard link
    model = cli.json(parts, "--scores", "msp")["models"][0]
    assert model["n_eval"] == 400
