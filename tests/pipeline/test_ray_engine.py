"""selcal on Ray (a local Ray instance on the CPU): the same bytes as the local engine.

Skipped when Ray is not installed (the main test venv), and a failure instead of a skip
when ``SELCAL_REQUIRE_RAY=1`` (set by ``.ci/run`` in its second venv, which has
``.[test,timm,ray]``). The dump tests also need timm (see tests/writers/test_dump_command.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, SAMPLES, run_cli

SAMPLE_MODELS = ["calibrator_cifar10_resnet50_ce", "calibrator_cifar10_resnet50_focal", "lspair_alpha0.1"]
REQUIRE_RAY = os.environ.get("SELCAL_REQUIRE_RAY") == "1"


def test_without_ray_the_engine_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    result = run_cli("evaluate", SAMPLES / f"{SAMPLE_MODELS[0]}.parquet", "--engine", "ray")
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "needs Ray" in lines[0] and "pip install ray (or, in a clone of selcal, pip install -e '.[ray]')" in lines[0], result.stderr


def test_an_unknown_engine_is_one_line():
    result = run_cli("evaluate", SAMPLES / f"{SAMPLE_MODELS[0]}.parquet", "--engine", "spark")
    assert result.exit_code == 2 and result.stderr.startswith("selcal: error: --engine must be local or ray")


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray") if not REQUIRE_RAY else __import__("ray")
    os.environ.pop("RAY_ADDRESS", None)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def sharded_copy(folder: Path, source: Path, cuts) -> Path:
    table = pq.read_table(source)
    folder.mkdir(parents=True)
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        pq.write_table(table.slice(a, b - a), folder / f"part-{i}.parquet")
    return folder


def test_ray_engine_writes_the_bytes_of_the_local_engine(ray, tmp_path):
    dumps = [SAMPLES / f"{name}.parquet" for name in SAMPLE_MODELS]
    dumps.append(sharded_copy(tmp_path / "densenet40_parts", SAMPLES / "markus93_densenet40_c10.parquet",
                              [0, 3000, 3001, 15000]))
    outputs = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine
        out.mkdir()
        result = run_cli("evaluate", *dumps, "--engine", engine, "--json", out / "r.json", "--csv", out / "b.csv",
                         "--markdown", out / "b.md")
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        outputs[engine] = (result.stdout, *((out / f).read_bytes() for f in ("r.json", "b.csv", "b.md")))
    assert outputs["ray"] == outputs["local"]
    assert b'"name": "densenet40_parts"' in outputs["ray"][1]


def test_a_failed_model_is_named_and_the_others_still_run(ray, tmp_path):
    table = pq.read_table(SAMPLES / f"{SAMPLE_MODELS[0]}.parquet")
    labels = table.column("label").to_numpy().copy()
    labels[5] = 42
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("label"), "label", [labels]), bad)
    missing = tmp_path / "missing.parquet"
    good = SAMPLES / f"{SAMPLE_MODELS[1]}.parquet"
    result = run_cli("evaluate", bad, good, missing, "--engine", "ray", "--json", tmp_path / "r.json")
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert "bad.parquet" in lines[0] and "row 5" in lines[0] and "label 42" in lines[0]
    assert "missing.parquet" in lines[1] and "no such file" in lines[1]
    assert "Traceback" not in result.output and not (tmp_path / "r.json").exists()


# ---------------------------------------------------------------------- dumping a zoo on Ray
@pytest.fixture(scope="module")
def timm_stack():
    if os.environ.get("SELCAL_REQUIRE_TIMM") == "1":
        import timm
    else:
        timm = pytest.importorskip("timm")
    return timm


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    from helpers import write_images

    return write_images(tmp_path_factory.mktemp("images") / "data")


def read_rows(path: Path):
    table = pq.read_table(path)
    return table.column("id").to_pylist(), table.column("split").to_pylist(), \
        table.column("label").to_numpy(), np.stack(table.column("logits").to_numpy(zero_copy_only=False))


MODELS = ("test_resnet", "test_vit")
COMMON = ("--num-classes", "3", "--workers", "0", "--batch-size", "2", "-q")


def test_sharded_ray_dump_equals_the_single_process_dump_even_with_a_worker_killed(ray, timm_stack, images, tmp_path,
                                                                                   monkeypatch):
    single = tmp_path / "single"
    single.mkdir()
    for model in MODELS:
        result = run_cli("dump", model, "--data", images, "--out", single / f"{model}.parquet", *COMMON)
        assert result.exit_code == 0, (result.stderr, result.exception)
    marker = tmp_path / "killed-once"
    monkeypatch.setenv("SELCAL_TEST_KILL_SHARD_ONCE", str(marker))
    zoo = tmp_path / "zoo"
    result = run_cli("dump", *MODELS, "--data", images, "--out-dir", zoo, "--shards", 3, "--engine", "ray", *COMMON)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert marker.exists()  # shard 1's first attempt died after its first batch, and Ray ran it again
    for model in MODELS:
        parts = sorted((zoo / model).glob("part-*.parquet"))
        assert [p.name for p in parts] == [f"part-{i:05d}-of-00003.parquet" for i in range(3)]
        assert not list((zoo / model).glob("*.partial"))
        whole = read_rows(single / f"{model}.parquet")
        rows = [read_rows(p) for p in parts]
        assert sum((r[0] for r in rows), []) == whole[0]
        assert sum((r[1] for r in rows), []) == whole[1]
        assert np.array_equal(np.concatenate([r[2] for r in rows]), whole[2])
        assert np.array_equal(np.concatenate([r[3] for r in rows]), whole[3])
    # the folder is one model for evaluate, with the numbers of the single-process dump
    monkeypatch.delenv("SELCAL_TEST_KILL_SHARD_ONCE")
    a = run_cli("evaluate", zoo / MODELS[0], "--json", "-", "--scores", "msp,max_logit")
    b = run_cli("evaluate", single / f"{MODELS[0]}.parquet", "--json", "-", "--scores", "msp,max_logit")
    strip = lambda text: [line for line in text.splitlines() if '"path"' not in line and '"name"' not in line]  # noqa: E731
    assert a.exit_code == 0 and strip(a.stdout) == strip(b.stdout)
    # a rerun skips every complete part
    before = {p: p.stat().st_mtime_ns for p in zoo.rglob("*.parquet")}
    result = run_cli("dump", *MODELS, "--data", images, "--out-dir", zoo, "--shards", 3, "--engine", "ray",
                     "--num-classes", "3", "--workers", "0", "--batch-size", "2")
    assert result.exit_code == 0, result.stderr
    assert "3 of 3 parts were complete and skipped" in result.stderr
    assert before == {p: p.stat().st_mtime_ns for p in zoo.rglob("*.parquet")}


def test_local_engine_dumps_the_same_parts(timm_stack, images, tmp_path):
    zoo = tmp_path / "zoo"
    result = run_cli("dump", MODELS[0], "--data", images, "--out-dir", zoo, "--shards", 2, *COMMON)
    assert result.exit_code == 0, (result.stderr, result.exception)
    single = tmp_path / "single.parquet"
    assert run_cli("dump", MODELS[0], "--data", images, "--out", single, *COMMON).exit_code == 0
    rows = [read_rows(p) for p in sorted((zoo / MODELS[0]).glob("part-*.parquet"))]
    whole = read_rows(single)
    assert sum((r[0] for r in rows), []) == whole[0]
    assert np.array_equal(np.concatenate([r[3] for r in rows]), whole[3])


def test_dump_option_errors_are_one_line(tmp_path):
    for args, text in [
        (["a", "b", "--out", tmp_path / "x.parquet"], "use --out-dir"),
        (["a", "--out-dir", tmp_path, "--out", tmp_path / "x.parquet"], "not both"),
        (["a"], "give --out"),
        (["a", "--out", tmp_path / "x.parquet", "--shards", "2"], "use --out-dir"),
    ]:
        result = run_cli("dump", *args, "--data", tmp_path)
        assert result.exit_code == 2, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and text in lines[0], result.stderr


@pytest.mark.slow
def test_nothing_imports_ray_unless_the_ray_engine_is_asked_for(tmp_path):
    import subprocess

    code = ("import sys, selcal, selcal.cli, selcal.pipeline.engines, selcal.io; "
            f"selcal.evaluate({str(ROOT / 'sample_logits' / (SAMPLE_MODELS[0] + '.parquet'))!r}, scores=('msp',)); "
            "print('ray' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc


def test_ray_says_nothing_raw_on_stderr(tmp_path):
    """Issue 22: Ray's own notices (its token-authentication line) never reach stderr: a quiet
    run on a local Ray instance prints nothing there."""
    import subprocess

    if not REQUIRE_RAY:
        pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-m", "selcal.cli", "evaluate",
                           SAMPLES / f"{SAMPLE_MODELS[0]}.parquet", "--engine", "ray", "-q", "--no-warnings",
                           "--scores", "msp"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
