"""The fixtures every test folder shares (the helpers they use are in helpers.py): small logit dumps
written into tmp_path, the in-process CLI, every results JSON checked against its schema.

Every dump is written with pyarrow (Parquet) or numpy (.npz) exactly in one of the
layouts of CONVENTIONS.md, "Input". The default data set has logits that are
multiples of 1/8 in [-16, 16], so they are exactly representable in float16 and every
layout and dtype holds the very same numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import (
    FLOAT_TYPES,
    REALDATA,
    REALDATA_ABSENT,
    Cli,
    Dumps,
    result_validator,
    assert_same_numbers,
    is_number,
    logits_array,
    make_data,
    numbers_only,
    result_schema_errors,
    strict_json,
)


@pytest.fixture
def dumps(tmp_path) -> Dumps:
    return Dumps(tmp_path / "in")


@pytest.fixture
def data():
    return make_data()


@pytest.fixture
def out_dir(tmp_path) -> Path:
    """An empty folder for --json outputs (checked to stay empty after a failed run)."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def cli() -> Cli:
    return Cli()


# ---------------------------------------------------------------- every results JSON against its schema


@pytest.fixture(scope="session", autouse=True)
def every_results_json_follows_its_schema():
    """Every results JSON the test suite writes is checked against the published JSON Schema: in this
    process as it is written (``EvaluationResult.to_json``: the CLI's ``--json``, the API's, the
    report's), and the file (or standard output) of a ``selcal ... --json`` command run through
    ``subprocess.run``; an invalid one fails the test that wrote it. Without the ``jsonschema``
    package (the test extra) nothing is checked."""
    try:
        result_validator()
    except ImportError:
        yield
        return
    from selcal.results import EvaluationResult

    written = EvaluationResult.to_json

    def checked(self) -> str:
        text = written(self)
        errors = result_schema_errors(json.loads(text))
        if errors:
            raise AssertionError("the results JSON breaks selcal/schema/result-1.json: " + "; ".join(errors[:5]))
        return text

    import subprocess

    started = subprocess.run

    def run_then_check(args, *positional, **keywords):
        """A ``selcal ... --json PATH`` run in a subprocess (outside this process's to_json): its file,
        or its standard output for ``--json -``, checked once the command succeeded."""
        done = started(args, *positional, **keywords)
        words = [str(a) for a in args] if isinstance(args, (list, tuple)) else []
        if done.returncode == 0 and "--json" in words[:-1] and any("selcal" in w for w in words):
            target = words[words.index("--json") + 1]
            text = done.stdout if target in ("-", "/dev/stdout") else (
                Path(target).read_text() if Path(target).is_file() else None)
            if isinstance(text, bytes):
                text = text.decode()
            document = _json_document(text)
            if isinstance(document, dict) and document.get("schema") == 1 and "models" in document:
                errors = result_schema_errors(document)
                if errors:
                    raise AssertionError(f"{target} breaks selcal/schema/result-1.json: " + "; ".join(errors[:5]))
        return done

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EvaluationResult, "to_json", checked)
        patch.setattr(subprocess, "run", run_then_check)
        yield


def _json_document(text):
    """The JSON of ``text`` (a results JSON printed alone), or None."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


@pytest.fixture
def h():
    """Some of helpers.py, as a fixture (for the tests written before helpers.py was importable)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        make_data=make_data,
        logits_array=logits_array,
        strict_json=strict_json,
        numbers_only=numbers_only,
        assert_same_numbers=assert_same_numbers,
        is_number=is_number,
        FLOAT_TYPES=FLOAT_TYPES,
    )


# ---------------------------------------------------------------- signal handlers stay the test process's own

_HANDLED = tuple(getattr(__import__("signal"), name) for name in ("SIGINT", "SIGTERM", "SIGALRM")
                 if hasattr(__import__("signal"), name))


@pytest.fixture(autouse=True)
def signal_handlers_are_restored():
    """Each test leaves SIGINT, SIGTERM and SIGALRM as it found them. ``selcal.cli.run`` called in-process
    ends by ignoring them (a real run is exiting then); left so, every later subprocess inherited SIGTERM
    ignored, a pool's ``terminate()`` could not end its workers and hung, and Ctrl-C stopped nothing."""
    import signal

    before = {signum: signal.getsignal(signum) for signum in _HANDLED}
    yield
    for signum, handler in before.items():
        if handler is not None and signal.getsignal(signum) != handler:
            signal.signal(signum, handler)


# ---------------------------------------------------------------- the tests the absent real data skipped


def pytest_terminal_summary(terminalreporter):
    """One line at the end when tests skipped for want of the shared real data (``helpers.realdata``): a
    worktree or a fresh clone without ``shared/`` beside it runs some 40 fewer tests, which a bare
    "N skipped" does not tell."""
    count = sum(1 for report in terminalreporter.stats.get("skipped", ())
                if isinstance(report.longrepr, tuple) and REALDATA_ABSENT in str(report.longrepr[2]))
    if count:
        terminalreporter.write_line(
            f"selcal: {count} test{'s' if count != 1 else ''} skipped: the real data was not found at {REALDATA} "
            "(clone the shared data beside the repository, or set SELCAL_REALDATA to its folder, to run them)",
            yellow=True)
