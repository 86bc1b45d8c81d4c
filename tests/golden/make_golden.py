"""Golden outputs of the command line: every sample dump, a segmentation folder, a leaderboard,
``--scores all``, ``--bootstrap`` with and without ``--bootstrap-refit``, ``--aece-estimator mbls``,
``check`` and ``compare`` with their Markdown and JUnit.

    python tests/golden/make_golden.py            # (re)write tests/golden/expected/
    python tests/golden/make_golden.py OUT_DIR    # write them elsewhere (the test compares the two)
    python tests/golden/make_golden.py OUT_DIR boot compare   # only these commands

Run from the repository root (paths in the outputs are relative to it). Every command runs
in-process (typer's CliRunner) with a fixed terminal width, so the terminal tables are kept too.
Nothing volatile is written (no version, time or absolute path), so the files are compared byte
for byte: a change in any of them is a change of selcal's behaviour.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parent / "expected"
S = "sample_logits"
DUMPS = ["calibrator_cifar10_resnet50_ce", "calibrator_cifar10_resnet50_focal", "lspair_alpha0",
         "lspair_alpha0.05", "lspair_alpha0.1", "lspair_alpha0.2", "markus93_densenet40_c10",
         "netcal_densenetbc100c100", "sctl_cifar10lt_resnet110"]
CE, FOCAL = f"{S}/{DUMPS[0]}.parquet", f"{S}/{DUMPS[1]}.parquet"
LSPAIR = [f"{S}/lspair_alpha{a}.parquet" for a in ("0", "0.05", "0.1", "0.2")]


def runs(out: str) -> list[tuple[str, list[str]]]:
    """(name, argv) of every command; each writes into ``out`` and its stdout is kept as NAME.txt."""
    o = lambda name: f"{out}/{name}"  # noqa: E731
    cases = [(f"eval_{d}", ["evaluate", f"{S}/{d}.parquet", "--json", o(f"eval_{d}.json")]) for d in DUMPS]
    cases += [
        ("all_ce", ["evaluate", CE, "--scores", "all", "--json", o("all_ce.json")]),
        ("all_lspair0.1", ["evaluate", LSPAIR[2], "--scores", "all", "--group-col", "source",
                           "--errors-csv", o("all_lspair0.1_errors.csv"), "--json", o("all_lspair0.1.json")]),
        ("all_netcal", ["evaluate", f"{S}/netcal_densenetbc100c100.parquet", "--scores", "all",
                        "--json", o("all_netcal.json")]),
        ("seg", ["evaluate", f"{S}/seg_alpha0", "--pixels-per-image", "400", "--scores", "all",
                 "--json", o("seg.json")]),
        ("seg_pair", ["evaluate", f"{S}/seg_alpha0", f"{S}/seg_alpha0.1", "--pixels-per-image", "300",
                      "--json", o("seg_pair.json"), "--csv", o("seg_pair.csv"), "--markdown", o("seg_pair.md")]),
        ("board", ["evaluate", *LSPAIR, CE, FOCAL, "--json", o("board.json"), "--csv", o("board.csv"),
                   "--markdown", o("board.md")]),
        ("board_all", ["evaluate", *LSPAIR, "--scores", "all", "--csv", o("board_all.csv"),
                       "--markdown", o("board_all.md"), "--sort-by", "aurc_msp"]),
        ("calib_ce", ["evaluate", CE, LSPAIR[1], "--scores", "calibrators", "--json", o("calib_ce.json")]),
        ("mbls", ["evaluate", CE, "--scores", "all", "--aece-estimator", "mbls", "--json", o("mbls.json")]),
        ("trapz", ["evaluate", LSPAIR[1], "--aurc-estimator", "trapz", "--temp-objective", "aurc",
                   "--pnorm-objective", "augrc", "--no-center", "--p-grid", "1,2,4,8", "--bins", "10",
                   "--risks", "0.02", "--coverages", "0.7", "--json", o("trapz.json")]),
        ("boot", ["evaluate", CE, "--bootstrap", "30", "--seed", "3", "--json", o("boot.json")]),
        ("boot_all", ["evaluate", LSPAIR[2], "--scores", "all", "--bootstrap", "20", "--json", o("boot_all.json")]),
        ("boot_refit", ["evaluate", LSPAIR[0], "--scores", "all", "--bootstrap", "8", "--bootstrap-refit",
                        "--json", o("boot_refit.json")]),
        ("boot_mbls", ["evaluate", LSPAIR[3], "--scores", "all", "--bootstrap", "20", "--aece-estimator", "mbls",
                       "--json", o("boot_mbls.json")]),
        ("boot_focal", ["evaluate", FOCAL, "--bootstrap", "30", "--json", o("boot_focal.json")]),
        ("check", ["check", o("boot_focal.json"), "--baseline", o("boot.json"), "--all", "--json", o("check.json"),
                   "--markdown", o("check.md"), "--junit", o("check.xml")]),
        ("check_bounds", ["check", o("all_ce.json"), "--max", "msp.aurc=0.0096", "--min", "temp.auroc=0.9",
                          "--max", "energy.aurc=0.02", "--json", o("check_bounds.json"), "--markdown",
                          o("check_bounds.md"), "--junit", o("check_bounds.xml")]),
        ("compare", ["compare", CE, FOCAL, "--bootstrap", "30", "--all", "--json", o("compare.json"),
                     "--markdown", o("compare.md"), "--junit", o("compare.xml")]),
        ("compare_all", ["compare", LSPAIR[0], LSPAIR[2], "--scores", "all", "--bootstrap", "20",
                         "--tolerance", "*=0.001", "--json", o("compare_all.json"), "--markdown",
                         o("compare_all.md"), "--junit", o("compare_all.xml")]),
    ]
    return cases


def write(out: Path, only: list[str] | None = None) -> None:
    """Run every command (or those named in ``only``), writing its files and stdout into ``out``
    (created afresh)."""
    from typer.testing import CliRunner

    from selcal.cli import app

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    os.chdir(ROOT)
    runner = CliRunner()
    for name, argv in runs(str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out)):
        if only is not None and name not in only:
            continue
        result = runner.invoke(app, argv, env={"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"})
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        if crashed or result.exit_code not in (0, 1):  # check/compare exit 1 on a regression: still an output
            raise SystemExit(f"{name}: exit {result.exit_code}\n{result.output}\n{result.exception!r}")
        text = result.stdout.replace(str(out), "OUT")
        (out / f"{name}.txt").write_text(f"exit {result.exit_code}\n{text}")
    # the streamed path from Python: the same JSON as the in-memory one
    import selcal

    for d in ("calibrator_cifar10_resnet50_ce", "lspair_alpha0.1"):
        if only is not None and f"stream_{d}" not in only:
            continue
        result = selcal.evaluate(f"{S}/{d}.parquet", stream=True, scores="all", chunk_rows=777)
        (out / f"stream_{d}.json").write_text(result.to_json())
    rel = str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out)
    for path in out.iterdir():  # outputs name their folder and the version: neither is behaviour
        text = path.read_text().replace(rel, "OUT").replace(f'"{selcal.__version__}"', '"VERSION"')
        path.write_text(text)


if __name__ == "__main__":
    write(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else EXPECTED, sys.argv[2:] or None)
