"""What selcal writes never damages anything (docs/CONVENTIONS.md, "Outputs, warnings and the command line").

1. Special targets: a character device (``/dev/null``, a node made with ``mknod``), a FIFO, a
   symlink, ``/dev/stdout``: written *through*, never replaced by a regular file.
2. ``--report`` creates its missing parent folder, as ``--plots`` does.
3. An output that is an input (same path, ``./``, symlink, hard link) is refused before any work,
   for evaluate, check and compare, and for the files ``--plots`` would write.
4. A failed run leaves no output at all, and its error names the file that failed.
5. Signals: Ctrl-C prints ``selcal: aborted`` (130), SIGTERM ``selcal: terminated`` (143), and
   neither leaves a temporary file (real subprocesses).
6. A successful run prints no Python warning.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLES, one_error_line, selcal_command, write_parquet

import selcal.api
import selcal.checks
import selcal.writers.output
from selcal.errors import SelcalError
from selcal.writers.output import Outputs

FAST = ("--scores", "msp,max_logit")


@pytest.fixture(autouse=True)
def no_figures(monkeypatch):
    """The figures are not what is tested here: two stand-ins (not drawn) keep these tests fast."""
    import selcal.figures
    import selcal.figures.render

    def render_figures(result, fmt="png", **kwargs):
        for kind in ("rc", "reliability"):
            yield selcal.figures.RenderedFigure(stem=f"m_{kind}", kind=kind, model=None, caption=kind, format=fmt,
                                                data=b"figure")

    monkeypatch.setattr(selcal.figures, "render_figures", render_figures)
    monkeypatch.setattr(selcal.figures.render, "render_figures", render_figures)


@pytest.fixture
def model(dumps, h):
    return dumps.parquet("m.parquet", *h.make_data(400, 4, 3))


@pytest.fixture
def result_json(cli, model, tmp_path):
    path = tmp_path / "in" / "r.json"
    assert cli("evaluate", model, *FAST, "--json", path, "-q").exit_code == 0
    return path


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ===================================================================== 1. special targets
OPTIONS = ["--json", "--csv", "--markdown", "--report"]


def read_fifo(path: Path, into: list) -> threading.Thread:
    def reader():
        with open(path, "rb") as fifo:
            into.append(fifo.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("option", OPTIONS)
def test_a_fifo_is_written_through(cli, model, tmp_path, option):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list = []
    thread = read_fifo(fifo, received)
    result = cli("evaluate", model, *FAST, option, fifo, "-q")
    thread.join(timeout=30)
    assert result.exit_code == 0, (result.stderr, repr(result.exception))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert received and received[0], "nothing arrived through the FIFO"
    if option == "--json":
        assert received[0].decode() == cli("evaluate", model, *FAST, "--json", "-").stdout
    if option == "--report":
        assert received[0].startswith(b"<!DOCTYPE html>") or b"<html" in received[0][:200]


def test_junit_and_markdown_of_check_through_a_fifo(cli, result_json, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list = []
    thread = read_fifo(fifo, received)
    result = cli("check", result_json, "--baseline", result_json, "--junit", fifo, "-q")
    thread.join(timeout=30)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and received[0].lstrip().startswith(b"<?xml")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device node needs root")
@pytest.mark.parametrize("option", OPTIONS)
def test_a_device_node_is_written_through(cli, model, tmp_path, option):
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the device of /dev/null
    result = cli("evaluate", model, *FAST, option, node, "-q")
    assert result.exit_code == 0, (result.stderr, repr(result.exception))
    info = os.lstat(node)
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3), "the device node was replaced"
    assert files_under(tmp_path / "in") == ["m.parquet"]


@pytest.mark.parametrize("option", OPTIONS + ["--junit"])
def test_dev_null_stays_a_character_device(cli, model, result_json, option):
    if option == "--junit":
        result = cli("check", result_json, "--baseline", result_json, "--junit", "/dev/null", "-q")
    else:
        result = cli("evaluate", model, *FAST, option, "/dev/null", "-q")
    assert result.exit_code == 0, (result.stderr, repr(result.exception))
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode), "/dev/null is no longer a character device"


def test_symlink_to_a_file_stays_a_link_and_its_target_is_replaced(cli, model, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real.name)
    result = cli("evaluate", model, *FAST, "--json", link, "-q")
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == "real.json", "the link was replaced"
    assert json.loads(real.read_text())["schema"] == 1
    assert stat.S_IMODE(real.stat().st_mode) == 0o640, "the target's permissions changed"
    assert sorted(os.listdir(tmp_path)) == ["in", "link.json", "real.json"], "temporary file left"


def test_symlink_to_a_device_is_written_through(cli, model, tmp_path):
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    assert cli("evaluate", model, *FAST, "--csv", link, "-q").exit_code == 0
    assert link.is_symlink() and stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_dangling_symlink_creates_its_target(cli, model, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to("made.json")
    assert cli("evaluate", model, *FAST, "--json", link, "-q").exit_code == 0
    assert link.is_symlink() and json.loads((tmp_path / "made.json").read_text())["schema"] == 1


def test_a_folder_a_socket_and_stdin_are_refused(cli, model, tmp_path):
    import socket

    assert "is a folder" in one_error_line(cli("evaluate", model, "--json", tmp_path))
    sock_path = tmp_path / "s.sock"
    if len(str(sock_path)) < 100:  # (the length limit of a Unix socket's path)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(sock_path))
            assert "is a socket" in one_error_line(cli("evaluate", model, "--json", sock_path))
    assert "standard input" in one_error_line(cli("evaluate", model, "--json", "/dev/stdin"))


@pytest.mark.slow
def test_dev_stdout_is_stdout_also_when_stdout_is_a_file(model, tmp_path):
    """``> out.txt``: /dev/stdout resolves to a regular file, which must not be renamed over."""
    expected = subprocess.run(selcal_command() + ["evaluate", str(model), *FAST, "--json", "-"],
                              capture_output=True, check=True).stdout
    with open(tmp_path / "out.txt", "wb") as out:
        out.write(b"before\n")
        out.flush()
        done = subprocess.run(selcal_command() + ["evaluate", str(model), *FAST, "--json", "/dev/stdout"],
                              stdout=out, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.txt").read_bytes() == b"before\n" + expected
    assert sorted(os.listdir(tmp_path)) == ["in", "out.txt"]


def test_two_outputs_to_stdout_or_to_one_file_are_refused(cli, model, tmp_path):
    assert "stdout" in one_error_line(cli("evaluate", model, "--json", "-", "--csv", "/dev/stdout"))
    line = one_error_line(cli("evaluate", model, "--json", tmp_path / "a", "--csv", tmp_path / "./a"))
    assert "also the output" in line


# ===================================================================== 2. --report's folder
def test_report_creates_its_missing_parent_folder(cli, model, tmp_path):
    report = tmp_path / "new" / "deeper" / "r.html"
    result = cli("evaluate", model, *FAST, "--report", report, "-q")
    assert result.exit_code == 0, (result.stderr, repr(result.exception))
    assert report.read_bytes().lstrip().lower().startswith(b"<!doctype html")


def test_report_under_a_file_is_refused_before_the_work(cli, model, tmp_path, no_evaluation):
    (tmp_path / "file").write_text("x")
    assert "is a file" in one_error_line(cli("evaluate", model, "--report", tmp_path / "file" / "sub" / "r.html"))


# ===================================================================== 3. inputs are never outputs
def no_work(*args, **kwargs):
    raise AssertionError("the work started although an output path was refused")


@pytest.fixture
def no_evaluation(monkeypatch):
    monkeypatch.setattr(selcal.api, "model_jobs", no_work)
    monkeypatch.setattr(selcal.api, "run_jobs", no_work)


def aliases(path: Path) -> dict:
    """Other names of ``path``: ./relative, a symlink, a hard link."""
    folder = path.parent
    (folder / "link").symlink_to(path.name)
    os.link(path, folder / "hard")
    return {"same": str(path), "dot": os.path.join(".", os.path.relpath(path)), "symlink": str(folder / "link"),
            "hardlink": str(folder / "hard")}


@pytest.mark.parametrize("alias", ["same", "dot", "symlink", "hardlink"])
@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("role", ["test", "val"])
def test_evaluate_refuses_an_output_that_is_an_input(cli, dumps, h, no_evaluation, alias, option, role):
    test = dumps.parquet("t.parquet", *h.make_data(300, 4, 1))
    val = dumps.npz("v.npz", *h.make_data(300, 4, 2))
    victim = test if role == "test" else val
    before = victim.read_bytes()
    name = aliases(victim)[alias]
    line = one_error_line(cli("evaluate", test, "--val", val, option, name))
    assert "never overwrites an input" in line and os.path.normpath(name) in line
    assert victim.read_bytes() == before


@pytest.mark.parametrize("given", ["folder", "glob"])
def test_evaluate_refuses_to_overwrite_a_part_of_a_folder_or_glob_input(cli, dumps, h, no_evaluation, given):
    logits, labels = h.make_data(300, 4, 1)
    first = dumps.parquet("parts/part-0.parquet", logits[:150], labels[:150])
    dumps.parquet("parts/part-1.parquet", logits[150:], labels[150:])
    source = first.parent if given == "folder" else first.parent / "part-*.parquet"
    before = first.read_bytes()
    assert "never overwrites an input" in one_error_line(cli("evaluate", source, "--json", first))
    assert first.read_bytes() == before


def test_plots_refuses_a_folder_holding_an_input_as_a_figure(cli, model, tmp_path, no_evaluation):
    figs = tmp_path / "figs"
    figs.mkdir()
    os.link(model, figs / "m_rc.png")
    before = model.read_bytes()
    assert "never overwrites an input" in one_error_line(cli("evaluate", model, "--plots", figs))
    assert model.read_bytes() == before


@pytest.mark.parametrize("alias", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("option", ["--json", "--markdown", "--junit"])
@pytest.mark.parametrize("role", ["current", "baseline"])
def test_check_refuses_an_output_that_is_an_input(cli, result_json, tmp_path, monkeypatch, alias, option, role):
    baseline = tmp_path / "base.json"
    baseline.write_bytes(result_json.read_bytes())
    victim = result_json if role == "current" else baseline
    before = victim.read_bytes()
    name = aliases(victim)[alias]
    monkeypatch.setattr(selcal.checks, "load_result", no_work)
    assert "never overwrites an input" in one_error_line(
        cli("check", result_json, "--baseline", baseline, option, name))
    assert victim.read_bytes() == before


@pytest.mark.parametrize("alias", ["same", "hardlink"])
@pytest.mark.parametrize("role", ["a", "b", "val"])
def test_compare_refuses_an_output_that_is_an_input(cli, dumps, h, monkeypatch, alias, role):
    a = dumps.parquet("a.parquet", *h.make_data(300, 4, 1))
    b = dumps.parquet("b.parquet", *h.make_data(300, 4, 1))
    val = dumps.parquet("v.parquet", *h.make_data(300, 4, 2))
    victim = {"a": a, "b": b, "val": val}[role]
    before = victim.read_bytes()
    name = aliases(victim)[alias]
    monkeypatch.setattr(selcal.checks, "compare_files", no_work)
    assert "never overwrites an input" in one_error_line(
        cli("compare", a, b, "--val", val, "--val", val, "--junit", name))
    assert victim.read_bytes() == before


# ===================================================================== 4. a failed run leaves nothing
def full_disk_under(monkeypatch, folder: Path) -> None:
    """Creating any file under ``folder`` fails with ENOSPC (a full disk there only)."""
    real = selcal.writers.output.tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).resolve().is_relative_to(folder.resolve()):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(selcal.writers.output.tempfile, "mkstemp", mkstemp)


def test_json_with_plots_on_a_full_disk_leaves_nothing(cli, model, tmp_path, monkeypatch):
    out, full = tmp_path / "out", tmp_path / "full"
    out.mkdir()
    full.mkdir()
    (out / "r.csv").write_text("previous\n")
    full_disk_under(monkeypatch, full)
    line = one_error_line(cli("evaluate", model, *FAST, "--json", out / "r.json", "--csv", out / "r.csv",
                              "--plots", full / "figs", "-q"))
    assert str(full / "figs") in line and ".png: cannot write (No space left on device)" in line, line
    assert files_under(out) == ["r.csv"] and (out / "r.csv").read_text() == "previous\n"
    assert files_under(full) == [], "the created plot folder or a figure was left"


def test_report_on_a_full_disk_leaves_no_json(cli, model, tmp_path, monkeypatch):
    full = tmp_path / "full"
    full.mkdir()
    full_disk_under(monkeypatch, full)
    line = one_error_line(cli("evaluate", model, *FAST, "--json", tmp_path / "r.json", "--report", full / "r.html"))
    assert f"{full / 'r.html'}: cannot write" in line
    assert not (tmp_path / "r.json").exists() and files_under(full) == []


def test_check_with_a_failing_junit_leaves_no_json(cli, result_json, tmp_path, monkeypatch):
    full = tmp_path / "full"
    full.mkdir()
    full_disk_under(monkeypatch, full)
    line = one_error_line(cli("check", result_json, "--baseline", result_json, "--json", tmp_path / "c.json",
                              "--junit", full / "j.xml"))
    assert f"{full / 'j.xml'}: cannot write" in line
    assert not (tmp_path / "c.json").exists()


def test_a_failing_stream_comes_before_any_rename(cli, model, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    line = one_error_line(cli("evaluate", model, *FAST, "--csv", tmp_path / "r.csv", "--json", "/dev/full"))
    assert line.startswith("selcal: error: /dev/full: cannot write")
    assert not (tmp_path / "r.csv").exists() and stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_outputs_transaction_commits_together_or_not_at_all(tmp_path):
    with pytest.raises(RuntimeError):
        with Outputs() as outputs:
            outputs.write(tmp_path / "a", "A")
            outputs.write(tmp_path / "sub" / "b", "B", make_parents=True)
            assert sorted(os.listdir(tmp_path)) != ["a", "sub"]
            raise RuntimeError("a later step failed")
    assert os.listdir(tmp_path) == [], "a temporary file or a created folder was left"
    with Outputs() as outputs:
        outputs.write(tmp_path / "a", "A")
        outputs.write(tmp_path / "sub" / "b", b"B", make_parents=True)
    assert (tmp_path / "a").read_text() == "A" and (tmp_path / "sub" / "b").read_text() == "B"
    with pytest.raises(SelcalError, match="written twice"):
        with Outputs() as outputs:
            outputs.write(tmp_path / "c", "1")
            outputs.write(tmp_path / "./c", "2")
    assert not (tmp_path / "c").exists()


# ===================================================================== 5. signals
WRAPPER = r"""
import os, sys, time
import selcal.api
import selcal.writers.output

marker, where = sys.argv[1], sys.argv[2]

def pause():
    open(marker, "w").close()
    time.sleep(60)

if where == "work":
    def run_jobs(*args, **kwargs):
        pause()
    selcal.api.run_jobs = run_jobs
else:  # while the outputs are staged: after the first temporary file is complete
    real_fsync = os.fsync
    calls = []
    def fsync(fd):
        real_fsync(fd)
        calls.append(fd)
        if len(calls) == 2:
            pause()
    selcal.writers.output.os.fsync = fsync

from selcal.cli import run
sys.argv = ["selcal"] + sys.argv[3:]
run()
"""


def run_and_signal(model: Path, folder: Path, where: str, signum: int):
    args = [sys.executable, "-c", WRAPPER, str(folder / "MARKER"), where, "evaluate", str(model), *FAST,
            "--json", str(folder / "r.json"), "--csv", str(folder / "r.csv"), "-q"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (folder / "MARKER").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run did not reach the pause"
            time.sleep(0.02)
        if where == "write":
            staged = [n for n in os.listdir(folder) if n.endswith(".tmp")]
            assert staged, f"no temporary file while the outputs are staged: {os.listdir(folder)}"
        os.kill(process.pid, signum)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("where", ["work", "write"])
@pytest.mark.parametrize("signum, code, line", [(signal.SIGINT, 130, "selcal: aborted"),
                                                (signal.SIGTERM, 143, "selcal: terminated")], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_run_with_one_line_and_no_file(model, tmp_path, where, signum, code, line):
    folder = tmp_path / "out"
    folder.mkdir()
    returncode, stderr = run_and_signal(model, folder, where, signum)
    assert (returncode, stderr) == (code, line + "\n")
    assert sorted(os.listdir(folder)) == ["MARKER"], "an output or a temporary file was left"


# ===================================================================== 6. quiet success
@pytest.mark.slow
def test_successful_runs_print_no_python_warning(tmp_path):
    """Every Python warning is an error here (-W error); the runs must still succeed, stderr silent."""
    samples = [str(SAMPLES / "markus93_densenet40_c10.parquet"), str(SAMPLES / "calibrator_cifar10_resnet50_ce.parquet")]
    strict = [sys.executable, "-W", "error", "-c", "import sys; from selcal.cli import run; sys.argv[0] = 'selcal'; run()"]
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    result = tmp_path / "r.json"
    runs = [
        ["evaluate", *samples, "--bootstrap", "20", "--json", str(result), "--csv", str(tmp_path / "b.csv")],
        ["check", str(result), "--baseline", str(result), "--tolerance", "aurc=0.01"],
        ["compare", str(SAMPLES / "lspair_alpha0.parquet"), str(SAMPLES / "lspair_alpha0.1.parquet"),
         "--bootstrap", "30", "--markdown", str(tmp_path / "c.md")],
    ]
    for args in runs:
        done = subprocess.run(strict + args + ["-q"], capture_output=True, env=env, timeout=300)
        assert done.returncode in (0, 1), (args[0], done.stderr.decode())
        assert "Warning" not in done.stderr.decode() and "Traceback" not in done.stderr.decode(), done.stderr.decode()


@pytest.mark.slow
def test_a_reader_that_closes_the_pipe_early_gets_one_line(model):
    process = subprocess.Popen(selcal_command() + ["evaluate", str(model), *FAST, "--csv", "-"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # before selcal writes: its write meets a closed pipe
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert process.returncode == 2 and stderr.count("\n") == 1, (process.returncode, stderr)
    assert stderr.startswith("selcal: error: -: the reader closed the pipe"), stderr


def test_a_signal_during_the_renames_acts_after_the_last_one(tmp_path, monkeypatch):
    """SIGTERM is held back while the staged files are renamed: the outputs are then all there."""
    class Stopped(BaseException):
        pass

    def stop(signum, frame):
        raise Stopped

    real_replace = os.replace

    def replace_then_signal(src, dst):
        real_replace(src, dst)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop)
    done = threading.Event()
    threading.Thread(target=done.wait, daemon=True).start()  # as the reading libraries' threads: a signal
    try:                                                     # blocked in one thread lands on another
        outputs = Outputs()
        for name in ("a", "b", "c"):
            outputs.write(tmp_path / name, name)
        monkeypatch.setattr(selcal.writers.output.os, "replace", replace_then_signal)
        with pytest.raises(Stopped):
            outputs.commit()
    finally:
        signal.signal(signal.SIGTERM, previous)
        done.set()
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "c"]
    assert [(tmp_path / n).read_text() for n in "abc"] == ["a", "b", "c"]


@pytest.mark.parametrize("alias", ["dot", "symlink", "hardlink"])
def test_ensemble_refuses_to_overwrite_a_member_under_another_name(dumps, h, alias):
    from selcal.writers.ensemble import ensemble

    a = dumps.parquet("a.parquet", *h.make_data(200, 3, 1))
    b = dumps.parquet("b.parquet", *h.make_data(200, 3, 2))
    before = a.read_bytes()
    name = aliases(a)[alias]
    with pytest.raises(SelcalError, match="never overwrites an input"):
        ensemble([a, b], name)
    assert a.read_bytes() == before


def _selcal(*args):
    import subprocess
    import sys
    from pathlib import Path
    return subprocess.run([str(Path(sys.executable).with_name("selcal")), *map(str, args)],
                          capture_output=True, text=True)


@pytest.mark.slow
def test_outputs_never_overwrite_a_sibling_labels_file_or_a_segmentation_image(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "test_logits.npy", rng.normal(size=(200, 3)))
    np.save(tmp_path / "test_labels.npy", rng.integers(0, 3, 200))
    before = (tmp_path / "test_labels.npy").read_bytes()
    run = _selcal("evaluate", tmp_path / "test_logits.npy", "--scores", "msp", "-q", "--no-warnings",
                  "--json", tmp_path / "test_labels.npy")
    assert run.returncode == 2 and "never overwrites an input" in run.stderr, run.stderr
    assert (tmp_path / "test_labels.npy").read_bytes() == before

    source = SAMPLES / "seg_alpha0"
    seg = tmp_path / "seg"
    seg.mkdir()
    for name in sorted(p.name for p in source.glob("*.npz"))[:3]:
        (seg / name).write_bytes((source / name).read_bytes())
    image = sorted(seg.glob("*.npz"))[0]
    before = image.read_bytes()
    run = _selcal("pixels", seg, "--out", image, "-q")
    assert run.returncode == 2 and "never overwrites an input" in run.stderr, run.stderr
    assert image.read_bytes() == before


def _host() -> str:
    return format(zlib.crc32(socket.gethostname().encode("utf-8", "surrogateescape")), "08x")


def test_stale_staging_of_a_dead_selcal_is_removed_and_nothing_else(tmp_path, cli):
    test = write_parquet(tmp_path / "m.parquet")
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer exists
    stale = out / f".r.json.selcal-{dead.pid}-{_host()}.abcd_123.tmp"
    keep = [out / f".r.json.selcal-{os.getppid()}-{_host()}.abcd_123.tmp",  # a live process's
            out / f".r.json.selcal-{dead.pid}-00000000.abcd_123.tmp",  # another machine's
            out / f".other.json.selcal-{dead.pid}-{_host()}.abcd_123.tmp",  # another output's
            out / ".r.json.abcd_123.tmp", out / "notes.txt"]
    for path in [stale, *keep]:
        path.write_text("x")
    link = out / f".r.json.selcal-{dead.pid}-{_host()}.zzzzzzzz.tmp"
    os.symlink(tmp_path / "m.parquet", link)  # never followed, never removed
    result = cli("evaluate", test, "--scores", "msp", "--json", out / "r.json", "-q")
    assert result.exit_code == 0, result.stderr
    assert not stale.exists()
    assert all(path.exists() for path in keep) and link.is_symlink() and test.exists()
    assert sorted(p.name for p in out.iterdir()) == sorted([p.name for p in keep] + [link.name, "r.json"])


def test_a_signal_while_the_staging_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    """SIGTERM landing between the staging file's creation and its registration (the window
    where a run could leave one behind) is held until the file is registered, then discarded."""
    from selcal.writers import output

    class Stop(BaseException):
        pass

    real = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)  # arrives as the file exists, before the caller has it
        return made

    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(Stop()))
    monkeypatch.setattr(output.tempfile, "mkstemp", mkstemp_then_signal)
    try:
        with pytest.raises(Stop):
            with output.Outputs() as outputs:
                outputs.write(tmp_path / "a.json", "{}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert os.listdir(tmp_path) == []
