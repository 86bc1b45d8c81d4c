"""Benchmark `selcal evaluate SEGDIR/` on a Cityscapes-size segmentation folder.

Generates (seeded) a folder of per-image ``.npz`` files like the Cityscapes validation
set seen by DeepLabV3+ before its final interpolation: 500 images, K = 19, float16 logits
of 256 x 512, uint8 labels of 1024 x 2048 with void (255) regions; about 7 MB per image,
3.5 GB in all. Then evaluates it in fresh subprocesses (all four scores, pnorm and temp
fitted on an image hold-out, every metric, 5000 pixels per image) and reports wall time
(imports excluded) and peak RSS (VmHWM), at a fraction of the images and at all of them,
to show time linear in the number of images.

    python bench/bench_segmentation.py                  # 500 images in a temporary folder
    python bench/bench_segmentation.py --images 100     # a smaller run (mind the disk: 7 MB per image)
    python bench/bench_segmentation.py --dir /big/disk --keep

The folder is deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_dumps import PEAK_MB  # noqa: E402

MEASURE = PEAK_MB + """
import selcal
start = time.perf_counter()
result = selcal.evaluate(sys.argv[1], pixels_per_image=int(sys.argv[2]))
model = result.models[0]
print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak_mb(), "n_eval": model.n_eval,
                  "n_val": model.n_val, "images": model.extra["pixels"]["images"],
                  "aurc_msp": model.scores["msp"]["aurc"]}))
"""


def write_folder(folder: Path, images: int, *, classes=19, h=256, w=512, big_h=1024, big_w=2048, seed=0,
                 first: int = 0) -> float:
    """Write ``images`` scenes into ``folder``; returns the bytes written."""
    from selcal.io.segmentation import label_grid

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(images):
        coarse = rng.integers(0, classes, size=(16, 32)).astype(np.uint8)
        label = np.repeat(np.repeat(coarse, big_h // 16, axis=0), big_w // 32, axis=1)
        void = np.repeat(np.repeat(rng.random((64, 128)) < 0.1, big_h // 64, axis=0), big_w // 128, axis=1)
        label[void] = 255
        logits = rng.standard_normal((classes, h, w), dtype=np.float32)
        grid = label_grid(label, h, w)
        hit = (grid != 255) & (rng.random((h, w)) < 0.8)
        rows, cols = np.nonzero(hit)
        logits[grid[rows, cols], rows, cols] += 3.0
        path = folder / f"city_{first + i:04d}.npz"
        np.savez(path, logits=logits.astype(np.float16), label=label)
        total += path.stat().st_size
    return total


def measure(folder: Path, pixels: int) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, str(folder), str(pixels)], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--pixels-per-image", type=int, default=5000)
    parser.add_argument("--dir", type=Path, default=None, help="Parent folder of the generated folder.")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="selcal_seg_bench.", dir=args.dir))
    try:
        small = max(5, args.images // 5)
        started = time.perf_counter()
        size = write_folder(parent / "part", small)
        size += write_folder(parent / "rest", args.images - small, seed=1, first=small)
        print(f"generated {args.images} images ({size / 1e9:.2f} GB) in {time.perf_counter() - started:.0f} s")
        first = measure(parent / "part", args.pixels_per_image)
        for path in sorted((parent / "part").iterdir()):  # the whole folder: both parts together
            path.rename(parent / "rest" / path.name)
        whole = measure(parent / "rest", args.pixels_per_image)
        for label, run in ((f"{small} images", first), (f"{args.images} images", whole)):
            print(f"{label:>11}: {run['seconds']:7.1f} s, peak RSS {run['peak_mb']:6.0f} MB, "
                  f"{run['n_eval']:,} evaluation + {run['n_val']:,} validation pixels "
                  f"({run['seconds'] / run['images'] * 1000:.0f} ms per image)")
    finally:
        if args.keep:
            print(f"kept {parent}")
        else:
            shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
