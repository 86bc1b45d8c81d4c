#!/usr/bin/env python
"""Train the segmentation label-smoothing pair of ``sample_logits/`` on the CPU (a few minutes).

Two small fully convolutional networks that differ *only* in the label-smoothing level
alpha of their loss (same synthetic scenes, initial weights, batches, optimiser and
schedule), as Xia et al. (2024) do with DeepLabV3+ on Cityscapes. Their logits on 60 test
scenes are written as segmentation folders, one ``.npz`` per image, in the layout
``selcal evaluate SEGDIR/`` reads::

    sample_logits/seg_alpha0/scene_000.npz     logits (K x 16 x 32, float16), label (64 x 128, uint8)
    sample_logits/seg_alpha0.1/scene_000.npz

The logits are the network output *before* its final interpolation (1/4 of the label
resolution), as Xia et al. extract them; selcal takes the label at the centre of each
logit cell.

The scenes are street-like (a crude Cityscapes): sky, buildings, vegetation above a
horizon; road, sidewalks and cars below; a void band (label 255) along every class
boundary, as Cityscapes leaves boundaries unlabelled. Colours are noisy and road and
sidewalk are close in colour, with a per-scene lighting change, so the networks make
whole-region errors (sidewalk taken for road), the error of Xia et al.'s fig. 6.

Usage (torch is a development dependency only):

    .venv/bin/pip install torch==2.13.0
    .venv/bin/python scripts/train_seg_pair.py            # trains both, writes, prints selcal's numbers
    .venv/bin/python scripts/train_seg_pair.py --dry-run  # trains and prints, writes nothing

Every random draw comes from ``--seed``; torch runs on one thread with deterministic
algorithms, so a rerun on the same torch build gives the same logits.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "sample_logits"
CLASSES = ("sky", "building", "vegetation", "road", "sidewalk", "car")
SKY, BUILDING, VEGETATION, ROAD, SIDEWALK, CAR = range(6)
VOID = 255
# Mean colour of each class (RGB in [0, 1]); road and sidewalk are close.
COLOURS = np.array([[0.55, 0.70, 0.95], [0.55, 0.45, 0.40], [0.25, 0.55, 0.25],
                    [0.45, 0.45, 0.48], [0.55, 0.52, 0.52], [0.75, 0.15, 0.15]])


# ---------------------------------------------------------------------------- scenes
def make_scene(rng: np.random.Generator, h: int = 64, w: int = 128):
    """(image 3 x h x w float32, label h x w uint8 with VOID on boundaries)."""
    label = np.full((h, w), SKY, dtype=np.int64)
    horizon = int(rng.integers(h // 3, h // 2))
    x = 0
    while x < w:  # buildings and trees along the horizon
        width = int(rng.integers(8, 28))
        top = int(rng.integers(2, horizon - 2))
        label[top:horizon, x:x + width] = BUILDING if rng.random() < 0.7 else VEGETATION
        x += width + int(rng.integers(0, 10))
    rows = np.arange(h)[:, None]
    cols = np.arange(w)[None, :]
    depth = (rows - horizon) / max(h - horizon, 1)  # 0 at the horizon, 1 at the bottom
    centre = w / 2 + rng.normal(0, w / 10)
    half = (0.08 + 0.42 * depth) * w
    walk = (0.05 + 0.25 * depth) * w * rng.uniform(0.6, 1.4)
    below = rows >= horizon
    label[below & (np.abs(cols - centre) < half)] = ROAD
    sidewalk = below & (np.abs(cols - centre) >= half) & (np.abs(cols - centre) < half + walk)
    label[sidewalk] = SIDEWALK
    label[below & (np.abs(cols - centre) >= half + walk)] = VEGETATION
    for _ in range(int(rng.integers(0, 4))):  # cars on the road
        cy = int(rng.integers(horizon + 3, h - 4))
        scale = (cy - horizon) / max(h - horizon, 1)
        ch, cw = max(2, int(10 * scale)), max(3, int(22 * scale))
        cx = int(np.clip(centre + rng.normal(0, half[cy, 0] / 2 if np.ndim(half) else 1), 0, w - cw))
        label[max(cy - ch, 0):cy, cx:cx + cw] = CAR
    # image: class colour, a per-scene light, a per-region tint, texture and noise
    light = rng.uniform(0.75, 1.25)
    tint = rng.normal(0, 0.06, size=(len(CLASSES), 3))
    image = (COLOURS[label] + tint[label]) * light
    image[label == BUILDING] += 0.08 * np.sin(cols * 1.3)[..., None].repeat(h, 0)[label == BUILDING]
    image += rng.normal(0, 0.10, size=image.shape)
    # void: a one-pixel band on every class boundary (Cityscapes leaves boundaries unlabelled)
    edge = np.zeros((h, w), dtype=bool)
    edge[1:] |= label[1:] != label[:-1]
    edge[:, 1:] |= label[:, 1:] != label[:, :-1]
    label = label.astype(np.uint8)
    label[edge] = VOID
    return image.transpose(2, 0, 1).astype(np.float32), label


# ----------------------------------------------------------------------------- model
def build_net(torch, k: int, width: int):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, width, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=2, dilation=2), nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=4, dilation=4), nn.ReLU(),
        nn.Conv2d(width, k, 1),
    )


def train(torch, net, images, labels, alpha: float, args):
    """SGD with momentum and a one-cycle schedule; the loss on the logits upsampled to the label size."""
    f = torch.nn.functional
    optimiser = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    steps = args.epochs * (len(images) // args.batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=args.lr, total_steps=steps)
    order_rng = np.random.default_rng(args.seed + 1)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))
    for epoch in range(args.epochs):
        order = order_rng.permutation(len(images))
        for start in range(0, len(order) - args.batch + 1, args.batch):
            batch = torch.from_numpy(order[start:start + args.batch])
            logits = net(x_all[batch])
            up = f.interpolate(logits, size=y_all.shape[1:], mode="bilinear", align_corners=False)
            loss = f.cross_entropy(up, y_all[batch], ignore_index=VOID, label_smoothing=alpha)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
    return net


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alphas", default="0,0.1", help="Label-smoothing levels, comma-separated.")
    parser.add_argument("--train", type=int, default=400, help="Training scenes.")
    parser.add_argument("--test", type=int, default=60, help="Test scenes written to each folder.")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--width", type=int, default=32, help="Channels of every hidden layer.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--dry-run", action="store_true", help="Train and print; write nothing.")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch is needed: .venv/bin/pip install torch==2.13.0", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(args.seed)
    scenes = [make_scene(rng) for _ in range(args.train + args.test)]
    images = np.stack([s[0] for s in scenes])
    labels = np.stack([s[1] for s in scenes])
    torch.manual_seed(args.seed)
    initial = build_net(torch, len(CLASSES), args.width).state_dict()
    import selcal

    alphas = [float(a) for a in args.alphas.split(",")]
    folders = []
    work = Path(tempfile.mkdtemp(prefix="seg_pair."))
    try:
        for alpha in alphas:
            net = build_net(torch, len(CLASSES), args.width)
            net.load_state_dict(initial)
            started = time.time()
            train(torch, net, images[:args.train], labels[:args.train], alpha, args)
            net.eval()
            folder = work / f"seg_alpha{alpha:g}"
            folder.mkdir()
            with torch.no_grad():
                for i in range(args.test):
                    index = args.train + i
                    logits = net(torch.from_numpy(images[index:index + 1]))[0].numpy()
                    np.savez_compressed(folder / f"scene_{i:03d}.npz", logits=logits.astype(np.float16),
                                        label=labels[index])
            model = selcal.evaluate(str(folder)).models[0]
            print(f"alpha {alpha:g}: trained in {time.time() - started:.0f} s; pixel accuracy "
                  f"{100 * model.accuracy:.2f}%, AURC msp {100 * model.scores['msp']['aurc']:.2f}%, "
                  f"pnorm {100 * model.scores['pnorm']['aurc']:.2f}% (p = {model.scores['pnorm']['p']}, "
                  f"fallback {model.scores['pnorm']['fallback']}), ECE {100 * model.scores['msp']['ece']:.2f}%")
            folders.append(folder)
        if not args.dry_run:
            for folder in folders:
                target = args.out / folder.name
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(folder, target)
                print(f"wrote {target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
