"""Size of the HTML report against the number of models: what each model adds, and where it goes.

Builds CIFAR-size results as bench_figures.py does (10 000 x 10 test rows, 5 000 validation
rows, the default scores, the logit profile kept as ``--plots``/``--report`` keep it), draws
their figures on every core, writes the report (``write_report``), and prints a JSON: the
page's size, the size per model, the bytes of the page that are not images, every figure
kind's count and bytes, and how many images are embedded against how many distinct ones (an
image embedded twice would be counted here). The same run for 1 and N models gives the growth
per model. Figures are drawn once per size; the time to draw them is printed too.

    python bench/bench_report.py                  # 1 and 40 models
    python bench/bench_report.py --models 1 10 40
    python bench/bench_report.py --out /tmp/pages   # keep the pages

To compare two versions of selcal, run it with each on PYTHONPATH (the JSON names the version).
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_figures import make_result  # noqa: E402


def measure(n_models: int, folder: Path) -> dict:
    import selcal
    from selcal.figures import render_figures
    from selcal.figures.render import default_workers
    from selcal.report.html import write_report

    result = make_result(n_models)
    start = time.perf_counter()
    figures = list(render_figures(result, "png", workers=default_workers()))
    seconds = time.perf_counter() - start
    page = folder / f"report_{n_models}.html"
    write_report(result, page, figures)
    text = page.read_text(encoding="utf-8")
    embedded = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    images = [base64.b64decode(data) for data in embedded]
    kinds: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for figure in figures:
        kinds[figure.kind][0] += 1
        kinds[figure.kind][1] += len(figure.data)
    return {
        "selcal": selcal.__version__,
        "models": n_models,
        "figures": len(figures),
        "draw_seconds": round(seconds, 2),
        "page_bytes": len(text.encode("utf-8")),
        "page_bytes_per_model": round(len(text.encode("utf-8")) / n_models),
        "image_bytes": sum(len(image) for image in images),
        "bytes_not_images": len(text.encode("utf-8")) - sum(len(data) for data in embedded),
        "images_embedded": len(images),
        "distinct_images": len({hashlib.sha256(image).digest() for image in images}),
        "by_kind": {kind: {"count": count, "bytes": size, "bytes_each": size // count}
                    for kind, (count, size) in kinds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, nargs="+", default=[1, 40])
    parser.add_argument("--out", type=Path, help="keep the pages here (report_N.html), e.g. to open them in a browser")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = args.out or Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        sizes = [measure(n, out) for n in args.models]
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "sizes": sizes}
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        report["bytes_per_added_model"] = round((last["page_bytes"] - first["page_bytes"])
                                                / (last["models"] - first["models"]))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
