"""``selcal dump``: a real timm model over a generated image folder, through the CLI.

Two parts:

- the pure pieces of ``selcal/writers/dump/`` (listing, class maps, labels CSV, seeded split and
  sample, the streaming writer, the resume check) and the promise that ``selcal`` and
  ``selcal.cli`` never import torch: these need neither torch nor timm and run everywhere;
- the command itself with tiny timm models created with ``pretrained=False`` (``test_resnet``,
  ``test_vit``): these are skipped when timm is not installed (the main test venv), and
  fail instead of skipping when ``SELCAL_REQUIRE_TIMM=1`` (set by ``.ci/run`` in its timm venv).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import CLASSES, one_error_line, run_cli, write_images

import selcal
from selcal.errors import SelcalError
from selcal.writers import dump as D

REQUIRE_TIMM = os.environ.get("SELCAL_REQUIRE_TIMM") == "1"
N_GOOD = 12  # 4 readable images per class, plus one corrupt file in dog/
MODEL_K = 3


def _require_timm():
    if REQUIRE_TIMM:  # CI's timm venv: a missing timm is a failure, not a skip
        import timm  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        return timm
    return pytest.importorskip("timm")


# ====================================================================== no torch needed
@pytest.mark.slow
def test_selcal_and_cli_do_not_import_torch():
    code = ("import sys, selcal, selcal.cli, selcal.writers.dump; "
            "print(sorted(m for m in ('torch', 'torchvision', 'timm', 'PIL') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out


_BLOCK_STACK = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in ('torch', 'torchvision', 'timm'):
                raise ModuleNotFoundError(f'No module named {name!r}', name=name)
    sys.meta_path.insert(0, Block())
    from selcal.cli import run
    sys.argv = ['selcal'] + sys.argv[1:]
    run()
""")


@pytest.mark.slow
def test_without_the_extra_dump_says_how_to_install(tmp_path):
    data = tmp_path / "data"
    (data / "a").mkdir(parents=True)
    (data / "a" / "x.jpg").write_bytes(b"")
    out = tmp_path / "out.parquet"
    proc = subprocess.run([sys.executable, "-c", _BLOCK_STACK, "dump", "test_resnet", "--data", str(data),
                           "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: selcal dump needs torch, torchvision and timm")
    assert "pip install torch torchvision timm (or, in a clone of selcal, pip install -e '.[timm]')" in lines[0]
    assert "selcal[timm]" not in lines[0]  # no registry serves selcal: the hint must work from a clone
    assert not out.exists()


def test_parse_class_map_forms(tmp_path):
    def parse(name, text):
        path = tmp_path / name
        path.write_text(text)
        return D.parse_class_map(path)

    expected = {"n01": 0, "n02": 1, "n03": 2}
    assert parse("a.json", json.dumps(expected)) == expected
    assert parse("imagenet_class_index.json",
                 json.dumps({"0": ["n01", "tench"], "1": ["n02", "goldfish"], "2": ["n03", "shark"]})) == expected
    assert parse("b.json", json.dumps({"0": "n01", "1": "n02", "2": "n03"})) == expected
    assert parse("c.json", json.dumps(["n01", "n02", "n03"])) == expected
    assert parse("synsets.txt", "n01 tench, Tinca tinca\nn02 goldfish\n\nn03 great white shark\n") == expected
    assert parse("plain.txt", "# classes\nn01\nn02\nn03\n") == expected
    assert parse("explicit.txt", "n03\t2\nn01\t0\nn02\t1\n") == expected
    assert parse("explicit.csv", "n03,2\nn01,0\nn02,1\n") == expected
    for name, text, message in [
        ("bad.json", "{", "not valid JSON"),
        ("neg.json", '{"a": -1}', "not a non-negative integer"),
        ("twice.txt", "a 1\na 2\n", "mapped twice"),
        ("empty.txt", "\n\n", "holds no classes"),
        ("odd.json", '{"a": [1, 2]}', "not a class map"),
    ]:
        with pytest.raises(SelcalError, match=message):
            parse(name, text)
    with pytest.raises(SelcalError, match="no such file"):
        D.parse_class_map(tmp_path / "missing.json")


def test_list_image_folder(tmp_path):
    data = write_images(tmp_path / "data")
    listing = D.list_image_folder(data)
    assert listing.ids == sorted(listing.ids) and len(listing) == N_GOOD + 1  # the corrupt file is listed
    assert "dog/broken.jpg" in listing.ids and not any("notes" in i or "hidden" in i for i in listing.ids)
    assert listing.n_other_files == 1
    assert listing.classes == {"cat": 0, "dog": 1, "fox": 2}
    assert [int(v) for v in listing.labels] == [CLASSES.index(i.split("/")[0]) for i in listing.ids]
    mapped = D.list_image_folder(data, {"cat": 7, "dog": 3, "fox": 5, "unused": 0})
    assert [int(v) for v in mapped.labels] == [{"cat": 7, "dog": 3, "fox": 5}[i.split("/")[0]] for i in mapped.ids]
    with pytest.raises(SelcalError, match=r"class folder 'fox' not in map.json"):
        D.list_image_folder(data, {"cat": 0, "dog": 1}, "map.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SelcalError, match="is empty"):
        D.list_image_folder(tmp_path / "empty")
    (tmp_path / "empty" / "a").mkdir()
    with pytest.raises(SelcalError, match="hold no images"):
        D.list_image_folder(tmp_path / "empty")
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "x.jpg").write_bytes(b"")
    with pytest.raises(SelcalError, match="--labels CSV"):
        D.list_image_folder(flat)
    with pytest.raises(SelcalError, match="no such folder"):
        D.list_image_folder(tmp_path / "nowhere")


def test_read_labels_csv(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    csv = tmp_path / "labels.csv"
    csv.write_text("path,label\nb.jpg,1\nsub/a.jpg,0\nc.jpg,2\n")
    listing = D.read_labels_csv(flat, csv)
    assert listing.ids == ["b.jpg", "c.jpg", "sub/a.jpg"] and listing.labels.tolist() == [1, 2, 0]
    csv.write_text("label,path\ncat,a.jpg\ndog,b.jpg\n")
    assert D.read_labels_csv(flat, csv, {"cat": 4, "dog": 9}).labels.tolist() == [4, 9]
    for text, message in [
        ("path,label\na.jpg,1\na.jpg,2\n", "listed twice"),
        ("path,label\na.jpg,cat\n", "not an integer"),
        ("path,label\na.jpg,-1\n", "negative"),
        ("file,class\na.jpg,1\n", "needs the columns path and label"),
        ("path,label\n", "no images"),
        ("path,label\n../a.jpg,1\n", "not inside the data folder"),
    ]:
        csv.write_text(text)
        with pytest.raises(SelcalError, match=message):
            D.read_labels_csv(flat, csv)


def test_split_and_sample_depend_on_ids_and_seed_only():
    ids = [f"class{c}/img{i:04d}.jpg" for c in range(5) for i in range(200)]
    split = dict(zip(ids, D.assign_split(ids, 0.2, seed=0)))
    assert sum(v == "val" for v in split.values()) == 200
    shuffled = list(np.random.default_rng(1).permutation(ids))
    assert dict(zip(shuffled, D.assign_split(shuffled, 0.2, seed=0))) == split
    other = dict(zip(ids, D.assign_split(ids, 0.2, seed=1)))
    assert other != split and sum(v == "val" for v in other.values()) == 200
    assert set(D.assign_split(ids, 0.0, 0)) == {"test"} and set(D.assign_split(ids, 1.0, 0)) == {"val"}
    assert sum(D.assign_split(ids[:7], 0.5, 0) == "val") == 4  # round half up, as evaluate's hold-out
    sample = {ids[i] for i in D.select_limit(ids, 50, seed=0)}
    assert len(sample) == 50 and {shuffled[i] for i in D.select_limit(shuffled, 50, seed=0)} == sample
    assert len({i.split("/")[0] for i in sample}) == 5  # spread over the classes, not the first folder
    assert D.select_limit(ids, None, 0).tolist() == list(range(len(ids)))
    assert D.select_limit(ids, 10_000, 0).tolist() == list(range(len(ids)))


def _write(out, k=4, dtype="float32", rows=(5, 3, 4), row_group_rows=6, metadata=None):
    writer = D.DumpWriter(out, k, dtype, {"selcal.model": "m", **(metadata or {})}, row_group_rows=row_group_rows)
    rng = np.random.default_rng(0)
    everything = []
    first = 0
    for n in rows:
        logits = rng.normal(size=(n, k)).astype(np.float32)
        ids = [f"c/{first + i:03d}.jpg" for i in range(n)]
        split = np.array(["val" if i % 3 == 0 else "test" for i in range(n)], dtype=object)
        writer.write(ids, split, np.arange(n) % k, logits)
        everything.append(logits)
        first += n
    assert writer.partial.exists() and not Path(out).exists()
    return writer, np.concatenate(everything)


def test_writer_streams_row_groups_and_renames_when_complete(tmp_path):
    out = tmp_path / "d.parquet"
    writer, logits = _write(out)
    writer.finish({"selcal.complete": "true", "selcal.n_rows": "12"})
    assert out.exists() and not writer.partial.exists()
    parquet = pq.ParquetFile(out)
    assert parquet.metadata.num_rows == 12 and parquet.metadata.num_row_groups == 2  # 5+3 (>= 6), then 4
    schema = parquet.schema_arrow
    assert schema.field("logits").type == pa.list_(pa.float32(), 4)
    assert schema.field("label").type == pa.int64() and schema.field("split").type == pa.string()
    # the keys added at the end are in the schema metadata that readers show, not only in the footer
    assert schema.metadata[b"selcal.complete"] == b"true" and schema.metadata[b"selcal.model"] == b"m"
    assert D.read_metadata(out)["selcal.n_rows"] == "12"
    dump = selcal.read_dump(out)
    np.testing.assert_array_equal(dump.logits, logits)
    assert dump.metadata["selcal.complete"] == "true" and list(dump.ids[:2]) == ["c/000.jpg", "c/001.jpg"]

    half = tmp_path / "h.parquet"
    writer, logits = _write(half, dtype="float16")
    writer.finish({"selcal.complete": "true"})
    assert pq.read_schema(half).field("logits").type == pa.list_(pa.float16(), 4)
    np.testing.assert_array_equal(selcal.read_dump(half).logits, logits.astype(np.float16))


def test_writer_abort_leaves_nothing(tmp_path):
    out = tmp_path / "d.parquet"
    writer, _ = _write(out)
    writer.abort()
    assert not out.exists() and not writer.partial.exists()


def test_check_existing(tmp_path):
    identity = {"selcal.model": "m", "selcal.seed": "0"}
    out = tmp_path / "d.parquet"
    assert D.check_existing(out, identity, overwrite=False) is False
    writer, _ = _write(out, metadata={"selcal.seed": "0"})
    writer.finish({"selcal.complete": "true"})
    assert D.check_existing(out, identity, overwrite=False) is True
    assert D.check_existing(out, identity, overwrite=True) is False
    with pytest.raises(SelcalError, match=r"exists with other settings \(seed '0' there, '1' now\).*--overwrite"):
        D.check_existing(out, {**identity, "selcal.seed": "1"}, overwrite=False)
    incomplete = tmp_path / "i.parquet"
    pq.write_table(pa.table({"label": [0]}), incomplete)
    with pytest.raises(SelcalError, match="not a complete selcal dump"):
        D.check_existing(incomplete, identity, overwrite=False)
    junk = tmp_path / "j.parquet"
    junk.write_text("hello")
    with pytest.raises(SelcalError, match="not a Parquet file"):
        D.check_existing(junk, identity, overwrite=False)


def test_bad_options_are_one_line_before_any_work(tmp_path):
    data = write_images(tmp_path / "data")
    out = tmp_path / "o.parquet"
    cases = [
        (["--dtype", "float64"], "--dtype must be float32 or float16"),
        (["--val-fraction", "1.5"], "--val-fraction must be in [0, 1]"),
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--pretrained", "--checkpoint", str(tmp_path / "x.pth")], "not both"),
        (["--checkpoint", str(tmp_path / "x.pth")], "x.pth: no such file"),
        (["--errors", str(tmp_path / "no" / "e.txt")], "does not exist"),
    ]
    for extra, message in cases:
        line = one_error_line(run_cli("dump", "test_resnet", "--data", data, "--out", out, *extra))
        assert message in line, (extra, line)
    line = one_error_line(run_cli("dump", "test_resnet", "--data", data, "--out", tmp_path / "no" / "o.parquet"))
    assert "does not exist" in line
    assert not out.exists()


# ====================================================================== with timm: a real model
@pytest.fixture(scope="module")
def stack():
    timm = _require_timm()
    import torch

    return torch, timm


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_images(tmp_path_factory.mktemp("images") / "data")


def make_checkpoint(stack, folder: Path, name: str, num_classes: int = MODEL_K, seed: int = 0) -> Path:
    torch, timm = stack
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, num_classes=num_classes)
    path = folder / f"{name}_{num_classes}.pth"
    torch.save(model.state_dict(), path)
    return path


def direct_logits(stack, name: str, checkpoint: Path, data: Path, ids, num_classes: int = MODEL_K) -> np.ndarray:
    """The model called directly on the same images with timm's own preprocessing."""
    torch, timm = stack
    from PIL import Image
    from timm.data import create_transform, resolve_model_data_config

    model = timm.create_model(name, pretrained=False, num_classes=num_classes)
    model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
    model.eval()
    transform = create_transform(**resolve_model_data_config(model), is_training=False)
    batch = torch.stack([transform(Image.open(data / i).convert("RGB")) for i in ids])
    with torch.inference_mode():
        return model(batch).numpy()


@pytest.fixture(scope="module")
def dumped(stack, images, tmp_path_factory):
    """One dump of test_resnet (3 outputs, weights from a checkpoint), with --errors."""
    folder = tmp_path_factory.mktemp("dumped")
    checkpoint = make_checkpoint(stack, folder, "test_resnet")
    out, errors = folder / "resnet.parquet", folder / "errors.txt"
    result = run_cli("dump", "test_resnet", "--data", images, "--out", out, "--checkpoint", checkpoint,
                     "--num-classes", MODEL_K, "--errors", errors, "--workers", 0, "--batch-size", 5)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return {"out": out, "errors": errors, "checkpoint": checkpoint, "result": result}


def test_dump_shape_labels_ids_split(dumped, images):
    table = pq.read_table(dumped["out"])
    assert table.schema.names == ["id", "split", "label", "logits"]
    assert table.schema.field("logits").type == pa.list_(pa.float32(), MODEL_K)
    assert table.schema.field("label").type == pa.int64()
    ids = table.column("id").to_pylist()
    assert len(ids) == N_GOOD and ids == sorted(ids) and "dog/broken.jpg" not in ids
    assert set(ids) == {f"{c}/{p.name}" for c in CLASSES for p in (images / c).iterdir()
                        if p.suffix in (".jpg", ".png") and p.name not in ("broken.jpg", ".hidden.jpg")}
    assert table.column("label").to_pylist() == [CLASSES.index(i.split("/")[0]) for i in ids]
    # the split is the seeded hash rule over all 13 listed images (the corrupt one included)
    listed = D.list_image_folder(images).ids
    expected = dict(zip(listed, D.assign_split(listed, 0.2, 0)))
    assert table.column("split").to_pylist() == [expected[i] for i in ids]
    assert set(table.column("split").to_pylist()) <= {"val", "test"}


def test_dump_metadata(dumped, stack, images):
    torch, timm = stack
    meta = D.read_metadata(dumped["out"])
    assert pq.read_schema(dumped["out"]).metadata[b"selcal.complete"] == b"true"
    assert meta["selcal.model"] == "test_resnet" and meta["selcal.pretrained"] == "false"
    assert meta["selcal.checkpoint"] == str(dumped["checkpoint"])
    assert meta["selcal.checkpoint_sha256"] == D.file_sha256(dumped["checkpoint"])
    assert meta["selcal.num_classes"] == str(MODEL_K) and meta["selcal.timm_version"] == timm.__version__
    assert meta["selcal.torch_version"] == torch.__version__
    model = timm.create_model("test_resnet", pretrained=False, num_classes=MODEL_K)
    config = timm.data.resolve_model_data_config(model)
    assert json.loads(meta["selcal.data_config"]) == json.loads(json.dumps(config))
    assert meta["selcal.n_rows"] == str(N_GOOD) and meta["selcal.n_unreadable"] == "1"
    assert meta["selcal.n_images"] == str(N_GOOD + 1) and meta["selcal.dtype"] == "float32"
    assert json.loads(meta["selcal.classes"]) == {"cat": 0, "dog": 1, "fox": 2}
    assert meta["selcal.seed"] == "0" and meta["selcal.val_fraction"] == "0.2"


def test_corrupt_image_is_skipped_counted_and_listed(dumped, images):
    lines = dumped["errors"].read_text().splitlines()
    assert len(lines) == 1
    path, reason = lines[0].split("\t")
    assert Path(path) == images / "dog" / "broken.jpg" and "UnidentifiedImageError" in reason
    assert f"wrote {dumped['out']}: {N_GOOD} rows, K = {MODEL_K}, 1 unreadable images skipped" \
        in dumped["result"].stderr


@pytest.mark.parametrize("name", ["test_resnet", "test_vit"])
def test_logits_equal_the_model_called_directly(stack, images, tmp_path, name):
    checkpoint = make_checkpoint(stack, tmp_path, name, seed=3)
    out = tmp_path / "d.parquet"
    result = run_cli("dump", name, "--data", images, "--out", out, "--checkpoint", checkpoint,
                     "--num-classes", MODEL_K, "--workers", 0, "--batch-size", 4)
    assert result.exit_code == 0, (result.stderr, result.exception)
    table = pq.read_table(out)
    ids = table.column("id").to_pylist()
    dumped = np.asarray(table.column("logits").to_pylist(), dtype=np.float32)
    direct = direct_logits(stack, name, checkpoint, images, ids)
    assert np.abs(direct).max() > 0.01  # not a degenerate model
    np.testing.assert_allclose(dumped, direct, rtol=0, atol=1e-5)

    half = tmp_path / "h.parquet"
    result = run_cli("dump", name, "--data", images, "--out", half, "--checkpoint", checkpoint,
                     "--num-classes", MODEL_K, "--workers", 0, "--dtype", "float16")
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert pq.read_schema(half).field("logits").type == pa.list_(pa.float16(), MODEL_K)
    halves = np.asarray(pq.read_table(half).column("logits").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(halves, direct, rtol=1e-3, atol=1e-4)


def test_evaluate_reads_the_dump(dumped):
    result = run_cli("evaluate", dumped["out"], "--json", "-")
    assert result.exit_code == 0, (result.stderr, result.exception)
    model = json.loads(result.stdout)["models"][0]
    assert model["num_classes"] == MODEL_K and model["n_eval"] + model["n_val"] == N_GOOD
    assert model["split"] == "split-column"
    assert selcal.read_dump(dumped["out"]).metadata["selcal.model"] == "test_resnet"


def test_resume_skips_a_complete_dump_and_refuses_other_settings(dumped, images, monkeypatch):
    out, checkpoint = dumped["out"], dumped["checkpoint"]
    before = (out.stat().st_mtime_ns, out.read_bytes())
    common = ["dump", "test_resnet", "--data", images, "--out", out, "--checkpoint", checkpoint,
              "--num-classes", MODEL_K, "--workers", 0]

    def no_model(*args, **kwargs):
        raise AssertionError("a complete dump was recomputed")

    with monkeypatch.context() as patch:
        patch.setattr(D.run, "load_model", no_model)  # where run_dump looks it up
        result = run_cli(*common)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert "complete with the same settings" in result.stderr and "skipped" in result.stderr
    assert (out.stat().st_mtime_ns, out.read_bytes()) == before

    line = one_error_line(run_cli(*common, "--seed", "1"))
    assert "exists with other settings (seed '0' there, '1' now)" in line and "--overwrite" in line
    line = one_error_line(run_cli(*common, "--limit", "5"))
    assert "limit" in line and "n_images" in line
    assert out.read_bytes() == before[1]

    other = out.parent / "other.parquet"
    other.write_bytes(out.read_bytes())
    result = run_cli(*common[:5], other, *common[6:], "--seed", "1", "--overwrite")
    assert result.exit_code == 0, (result.stderr, result.exception)
    meta = D.read_metadata(other)
    assert meta["selcal.seed"] == "1" and meta["selcal.complete"] == "true"
    assert not Path(str(other) + ".partial").exists()


def test_killed_run_leaves_no_output_and_a_rerun_completes(stack, images, tmp_path):
    out = tmp_path / "k.parquet"
    checkpoint = make_checkpoint(stack, tmp_path, "test_resnet")
    args = ["dump", "test_resnet", "--data", str(images), "--out", str(out), "--checkpoint", str(checkpoint),
            "--num-classes", str(MODEL_K), "--workers", "0", "--batch-size", "2"]
    killer = textwrap.dedent("""
        import os, signal, sys
        import selcal.writers.dump as d
        write = d.DumpWriter.write
        def write_then_die(self, *args, **kwargs):
            write(self, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)  # as a power cut or the OOM killer would
        d.DumpWriter.write = write_then_die
        from selcal.cli import run
        sys.argv = ['selcal'] + sys.argv[1:]
        run()
    """)
    proc = subprocess.run([sys.executable, "-c", killer, *args], capture_output=True, text=True)
    assert proc.returncode == -9, proc
    partial = Path(str(out) + ".partial")
    assert not out.exists() and partial.exists()
    result = run_cli(*args)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert out.exists() and not partial.exists()
    assert D.read_metadata(out)["selcal.complete"] == "true" and pq.read_metadata(out).num_rows == N_GOOD


def test_interrupted_run_removes_the_partial_file(stack, images, tmp_path, monkeypatch):
    out = tmp_path / "i.parquet"
    calls = []

    def interrupt(self, *args, **kwargs):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(D.DumpWriter, "write", interrupt)
    result = run_cli("dump", "test_resnet", "--data", images, "--out", out, "--workers", 0, "--num-classes", 3)
    assert calls and result.exit_code != 0
    assert not out.exists() and not Path(str(out) + ".partial").exists()


def test_limit_class_map_and_workers(stack, images, tmp_path):
    checkpoint = make_checkpoint(stack, tmp_path, "test_resnet", num_classes=4, seed=5)
    class_map = tmp_path / "map.json"
    class_map.write_text(json.dumps({"0": ["dog", "a dog"], "1": ["fox", "a fox"], "2": ["cat", "a cat"],
                                     "3": ["owl", "unused"]}))
    base = ["dump", "test_resnet", "--data", images, "--checkpoint", checkpoint, "--num-classes", 4,
            "--class-map", class_map]
    serial, parallel = tmp_path / "serial.parquet", tmp_path / "parallel.parquet"
    assert run_cli(*base, "--out", serial, "--workers", 0).exit_code == 0
    result = run_cli(*base, "--out", parallel, "--workers", 2, "--batch-size", 3)
    assert result.exit_code == 0, (result.stderr, result.exception)
    a, b = pq.read_table(serial), pq.read_table(parallel)
    assert a.column("id").to_pylist() == b.column("id").to_pylist()
    assert a.column("label").to_pylist() == [{"dog": 0, "fox": 1, "cat": 2}[i.split("/")[0]]
                                              for i in a.column("id").to_pylist()]
    np.testing.assert_allclose(np.asarray(a.column("logits").to_pylist()), np.asarray(b.column("logits").to_pylist()),
                               rtol=0, atol=1e-5)

    limited = tmp_path / "limited.parquet"
    result = run_cli(*base, "--out", limited, "--workers", 0, "--limit", 6)
    assert result.exit_code == 0, (result.stderr, result.exception)
    meta = D.read_metadata(limited)
    listed = D.list_image_folder(images).ids
    chosen = {listed[i] for i in D.select_limit(listed, 6, 0)}
    ids = pq.read_table(limited).column("id").to_pylist()
    assert set(ids) == chosen - {"dog/broken.jpg"}
    assert int(meta["selcal.n_rows"]) + int(meta["selcal.n_unreadable"]) == 6 and meta["selcal.limit"] == "6"


def test_labels_csv_for_a_flat_folder(stack, tmp_path):
    from PIL import Image

    flat = tmp_path / "flat"
    flat.mkdir()
    rng = np.random.default_rng(2)
    rows = ["path,label"]
    for i in range(5):
        Image.fromarray(rng.integers(0, 256, size=(30, 30, 3), dtype=np.uint8)).save(flat / f"{i}.png")
        rows.append(f"{i}.png,{i % 2}")
    rows.append("missing.png,1")
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    out, errors = tmp_path / "flat.parquet", tmp_path / "errors.txt"
    result = run_cli("dump", "test_vit", "--data", flat, "--labels", tmp_path / "labels.csv", "--out", out,
                     "--workers", 0, "--num-classes", 2, "--errors", errors)
    assert result.exit_code == 0, (result.stderr, result.exception)
    table = pq.read_table(out)
    assert table.column("id").to_pylist() == [f"{i}.png" for i in range(5)]
    assert table.column("label").to_pylist() == [i % 2 for i in range(5)]
    assert errors.read_text().startswith(str(flat / "missing.png") + "\tFileNotFoundError")


def test_clear_errors_from_the_model_side(stack, images, tmp_path):
    out = tmp_path / "o.parquet"
    line = one_error_line(run_cli("dump", "test_resnett", "--data", images, "--out", out))
    assert "unknown timm model 'test_resnett'" in line and "test_resnet" in line
    # three class folders, a model with two outputs
    line = one_error_line(run_cli("dump", "test_resnet", "--data", images, "--out", out, "--num-classes", 2))
    assert "label 2 is outside the model's 2 classes" in line
    # a checkpoint with 3 classes into the default 1000-class head
    checkpoint = make_checkpoint(stack, tmp_path, "test_resnet")
    line = one_error_line(run_cli("dump", "test_resnet", "--data", images, "--out", out, "--checkpoint", checkpoint))
    assert "cannot load into test_resnet" in line and "--num-classes" in line
    line = one_error_line(run_cli("dump", "test_resnet.no_such_tag", "--pretrained", "--data", images, "--out", out))
    assert "no pretrained weights for 'test_resnet.no_such_tag'" in line and "--checkpoint PATH" in line
    broken = tmp_path / "broken"
    (broken / "a").mkdir(parents=True)
    (broken / "a" / "x.jpg").write_bytes(b"nope")
    line = one_error_line(run_cli("dump", "test_resnet", "--data", broken, "--out", out))
    assert "none of its 1 images could be read" in line
    assert not out.exists() and not Path(str(out) + ".partial").exists()


def test_pretrained_download_failure_is_one_line(stack, images, tmp_path):
    """No network for weights here: the failure is one line pointing at --checkpoint.

    Run offline (HF_HUB_OFFLINE=1, an empty cache) so it fails at once and the same way everywhere."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "TORCH_HOME": str(tmp_path / "th")}
    out = tmp_path / "p.parquet"
    proc = subprocess.run([sys.executable, "-m", "selcal.cli", "dump", "test_resnet.r160_in1k", "--pretrained",
                           "--data", str(images), "--out", str(out), "-q"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("selcal: error: could not download weights for test_resnet.r160_in1k: ")
    assert lines[0].endswith("; use --checkpoint PATH")
    assert not out.exists() and not Path(str(out) + ".partial").exists()
