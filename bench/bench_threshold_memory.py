"""Peak memory of `selcal threshold` on a large dump: read whole against streamed by row chunks,
in the same run on the same machine (and, with --before-src, the code of another checkout).

Each measurement runs in a fresh subprocess and reports its peak RSS (VmHWM), its wall time
(imports excluded) and its answer; the answers of every mode must be identical (the streamed
path gives the same bits). ``import`` is the peak of importing selcal alone.

    python bench/bench_threshold_memory.py                          # 200 000 x 1000 float32, msp and temp
    python bench/bench_threshold_memory.py --before-src /tmp/old    # also the code of an older checkout

Modes: ``whole`` (``stream=False``: the file read into memory, as every version before did),
``streamed`` (the default call: a file whose logits exceed evaluate's memory budget, 64 MiB, is
streamed), ``before`` (the default call of the --before-src checkout). The dump is generated once
(seeded, make_dumps.py) into --dir and reused; its size is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_dumps import PEAK_MB, bench_dumps  # noqa: E402

CHILD = PEAK_MB + """
import selcal
path, score, mode, src = sys.argv[1:5]
assert selcal.__file__.startswith(src), (selcal.__file__, src)  # the code of the checkout asked for
if mode == "import":
    print(json.dumps({"seconds": 0.0, "peak_mb": peak_mb(), "answer": None}))
    raise SystemExit
kwargs = {"stream": False} if mode == "whole" else {}
start = time.perf_counter()
result = selcal.threshold(path, score=score, risk="0.05,0.1", **kwargs)
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak_mb(), "answer": result.to_dict()}))
"""


def run(mode: str, path: Path, score: str, src: Path) -> dict:
    src = src.resolve()
    env = {**os.environ, "PYTHONPATH": str(src)}  # run in src: 'python -c' puts the working folder first
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), score, mode, str(src)], check=True,
                         capture_output=True, text=True, env=env, cwd=src)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "selcal-bench")
    parser.add_argument("--n-test", type=int, default=200_000)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--scores", default="msp,temp", help="scores to certify, comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="runs per mode (the median is shown)")
    parser.add_argument("--before-src", type=Path, default=None,
                        help="a checkout of an older selcal (its default call is measured as 'before')")
    args = parser.parse_args()
    test, _ = bench_dumps(args.dir, args.n_test, 1000, args.classes, say=print)
    logits_mb = args.n_test * args.classes * 4 / 2**20
    print(f"dump: {test} ({args.n_test} x {args.classes} float32: {logits_mb:.0f} MB of logits, "
          f"{test.stat().st_size / 2**20:.0f} MB on disk); hold-out 20% validation rows")
    here = HERE.parent
    modes = [("whole", here), ("streamed", here)] + ([("before", args.before_src)] if args.before_src else [])
    base = run("import", test, "msp", here)["peak_mb"]
    print(f"import selcal alone: peak {base:.0f} MB")
    print(f"{'score':6} {'mode':9} {'peak MB':>8} {'seconds':>8}  peak / logits")
    for score in args.scores.split(","):
        answers, peaks = {}, {}
        for mode, src in modes:
            results = [run(mode, test, score, src) for _ in range(args.runs)]
            peak = statistics.median(r["peak_mb"] for r in results)
            seconds = statistics.median(r["seconds"] for r in results)
            answers[mode], peaks[mode] = results[0]["answer"], peak
            print(f"{score:6} {mode:9} {peak:8.0f} {seconds:8.1f}  {peak / logits_mb:.2f}")
        same = all(answer == answers["whole"] for answer in answers.values())
        print(f"{score:6} streamed / whole peak: {peaks['streamed'] / peaks['whole']:.2f}"
              + (f", streamed / before: {peaks['streamed'] / peaks['before']:.2f}" if "before" in peaks else "")
              + f"; answers identical: {same}")
        if not same:
            raise SystemExit(f"the answers differ: {json.dumps(answers)[:2000]}")


if __name__ == "__main__":
    main()
