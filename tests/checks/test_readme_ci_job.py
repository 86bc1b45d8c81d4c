"""The ready-to-copy CI job of docs/guides/compare-and-gate.md, run as written on the sample dumps (issue 20): it passes the
focal-loss model against the cross-entropy baseline and fails a clearly worse model on the same data."""

from __future__ import annotations

import pytest

import re
import shlex
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from helpers import CE, FOCAL, ROOT


def job_commands() -> list[list[str]]:
    """The selcal commands of the guide's workflow (its `run:` blocks), as argument lists."""
    readme = (ROOT / "docs" / "guides" / "compare-and-gate.md").read_text(encoding="utf-8")
    yaml = readme[readme.index("# .github/workflows/selcal.yml"):]
    yaml = yaml[:yaml.index("```")]
    commands = []
    for block in re.findall(r"run: \|\n((?:          .*\n)+)", yaml):
        text = re.sub(r"\\\n\s*", " ", block)  # continuation lines
        commands += [shlex.split(line) for line in text.splitlines() if line.strip().startswith("selcal ")]
    baseline = re.search(r"`(selcal evaluate ci/model\.parquet [^`]*--json ci/baseline\.json)`", readme)
    assert baseline, "the guide states the command that makes the baseline"
    assert [c[:2] for c in commands] == [["selcal", "evaluate"], ["selcal", "check"]], commands
    return [shlex.split(baseline.group(1))] + commands


def spoiled(path: Path, out: Path, share: float = 0.2, seed: int = 0) -> Path:
    """The model of ``path`` made clearly worse on the same data: the logits of a ``share`` of
    its test rows are shuffled between those rows (labels, ids and split stay)."""
    table = pq.read_table(path)
    logits = np.stack(table.column("logits").to_numpy(zero_copy_only=False))
    test = np.flatnonzero(np.array(table.column("split").to_pylist()) == "test")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(test, size=int(share * test.size), replace=False)
    logits[chosen] = logits[rng.permutation(chosen)]
    column = pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel(), pa.float32()), logits.shape[1])
    pq.write_table(table.set_column(table.schema.get_field_index("logits"), "logits", column), out)
    return out


def run_job(cli, workdir: Path, model: Path, baseline_model: Path) -> int:
    """The job in ``workdir``: the baseline made from ``baseline_model``, then the job's commands
    on ``model`` (as `ci/model.parquet`); the exit status of the check."""
    (workdir / "ci").mkdir(parents=True, exist_ok=True)
    (workdir / "selcal-report").mkdir(exist_ok=True)  # the job's `mkdir -p selcal-report`
    make_baseline, evaluate, check = job_commands()
    status = None
    for command, dump in ((make_baseline, baseline_model), (evaluate, model), (check, None)):
        args = [arg.replace("ci/model.parquet", str(dump)) if dump else arg for arg in command[1:]]
        args = [str(workdir / a) if a.startswith(("ci/", "selcal-report/")) else a for a in args]
        result = cli(*args)
        assert result.exit_code in ((0, 1) if command is check else (0,)), (command, result.stderr)
        status = result.exit_code
    assert (workdir / "selcal-report" / "junit.xml").exists() and (workdir / "selcal-report" / "check.md").exists()
    return status


@pytest.mark.slow
def test_the_readme_ci_job_passes_the_better_model_and_fails_a_worse_one(cli, tmp_path):
    assert run_job(cli, tmp_path / "focal", FOCAL, CE) == 0
    worse = spoiled(FOCAL, tmp_path / "worse.parquet")
    assert run_job(cli, tmp_path / "worse", worse, CE) == 1
    verdict = (tmp_path / "worse" / "selcal-report" / "check.md").read_text(encoding="utf-8")
    assert "FAIL" in verdict and "accuracy" in verdict
