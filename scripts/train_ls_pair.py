#!/usr/bin/env python
"""Train the label-smoothing sweep of ``sample_logits/`` on the CPU (about two minutes a model).

MLPs that differ *only* in the label-smoothing level alpha of their training loss
(alpha = 0, 0.05, 0.1, 0.2 by default; the first and third are "the LS pair")
(Xia et al. 2024, eq. 7): same synthetic data, same initial weights, same batches in the
same order, same optimiser and schedule. Their logits on a validation and a test split
are written as ``sample_logits/lspair_alpha<alpha>.parquet`` in the layout of
``scripts/make_sample_logits.py`` (``id``, ``split``, ``label``,
``fixed_size_list<float32>[K]`` ``logits``, zstd, ``selcal.*`` schema metadata), plus a
``source`` column (``clean`` / ``shifted``) for ``selcal evaluate --group-col source``.

The task is built so that errors have both causes Xia et al. discuss (their sec. 2.3):

* aleatoric: every class is a mixture of Gaussian clusters in 16 dimensions whose
  centres overlap with other classes', so some inputs have several probable labels;
* epistemic: 30% of the validation and test rows come from a *shifted* domain (the same
  clusters seen through a fixed random rotation of at most 1 radian), which the network
  never saw in training, like ImageNet-Sketch in their fig. 8.

The network (3 x 512 ReLU MLP, SGD with Nesterov momentum, one-cycle schedule, 60
epochs) fits its 20,000 training rows almost perfectly, as the CIFAR/ImageNet networks of
the paper do. Options exist for uniform label noise (``--label-noise`` for training,
``--eval-label-noise`` for evaluation) and a scaled shift (``--shift-scale``); with 10-20%
training-label noise, label smoothing *improved* MSP's AURC in our runs (it then acts as a
noise-robust loss), so the committed pair has none. See sample_logits/README.md.

Usage (torch is a development dependency only, not needed to use or test selcal):

    .venv/bin/pip install torch==2.13.0
    .venv/bin/python scripts/train_ls_pair.py            # trains all four, writes, prints selcal's AURCs
    .venv/bin/python scripts/train_ls_pair.py --dry-run  # trains and prints, writes nothing

Every random draw comes from ``--seed``; torch runs on one thread with deterministic
algorithms; even so, a rerun on another machine with the same torch build did not reproduce
the first pair bit for bit, so the committed files were all made by one run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "sample_logits"
MAX_TOTAL_BYTES = 4 * 1024 * 1024  # the four dumps together


# ----------------------------------------------------------------------------- data
def make_task(args, rng: np.random.Generator):
    """Centres of the clusters and the fixed transformation of the shifted domain."""
    k, d, m = args.classes, args.dim, args.clusters
    centres = rng.normal(0.0, args.spread, size=(k, m, d))
    # A rotation exp(A) with A a random skew-symmetric matrix whose largest rotation angle
    # is --shift-angle radians.
    from scipy.linalg import expm

    skew = rng.normal(size=(d, d))
    skew = skew - skew.T
    skew *= args.shift_angle / np.abs(np.linalg.eigvals(skew)).max()
    return centres, expm(skew)


def sample(n: int, task, args, rng: np.random.Generator, shifted: bool, label_noise: float):
    """n inputs and labels; a share ``label_noise`` of labels is redrawn uniformly."""
    centres, rotation = task
    k, m, d = centres.shape
    labels = rng.integers(0, k, size=n)
    cluster = rng.integers(0, m, size=n)
    x = centres[labels, cluster] + rng.normal(0.0, 1.0, size=(n, d))
    if shifted:
        x = args.shift_scale * (x @ rotation.T)
    noisy = rng.random(n) < label_noise
    labels = np.where(noisy, rng.integers(0, k, size=n), labels)
    return x.astype(np.float32), labels.astype(np.int64)


def make_data(args):
    rng = np.random.default_rng(args.seed)
    task = make_task(args, rng)
    train = sample(args.n_train, task, args, rng, shifted=False, label_noise=args.label_noise)
    parts = {}
    for split, n in (("val", args.n_val), ("test", args.n_test)):
        n_shift = int(round(args.shift_share * n))
        clean = sample(n - n_shift, task, args, rng, shifted=False, label_noise=args.eval_label_noise)
        moved = sample(n_shift, task, args, rng, shifted=True, label_noise=args.eval_label_noise)
        parts[split] = (
            np.concatenate([clean[0], moved[0]]),
            np.concatenate([clean[1], moved[1]]),
            np.array(["clean"] * (n - n_shift) + ["shifted"] * n_shift),
        )
    return train, parts


# ---------------------------------------------------------------------------- model
def train_and_predict(alpha: float, train, parts, args):
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.train_seed)
    x_train = torch.from_numpy(train[0])
    y_train = torch.from_numpy(train[1])
    d, k = x_train.shape[1], args.classes
    layers, width = [], d
    for _ in range(args.depth):
        layers += [torch.nn.Linear(width, args.width), torch.nn.ReLU()]
        width = args.width
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, k))
    optimiser = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=args.weight_decay,
                                nesterov=True)
    steps_per_epoch = -(-len(y_train) // args.batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=args.lr, epochs=args.epochs,
                                                   steps_per_epoch=steps_per_epoch)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=alpha)
    order_rng = torch.Generator().manual_seed(args.train_seed + 1)  # same batches for every alpha
    for _ in range(args.epochs):
        model.train()
        order = torch.randperm(len(y_train), generator=order_rng)
        for start in range(0, len(order), args.batch):
            batch = order[start:start + args.batch]
            optimiser.zero_grad()
            loss = loss_fn(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimiser.step()
            schedule.step()
    model.eval()
    with torch.no_grad():
        train_acc = float((model(x_train).argmax(1) == y_train).float().mean())
        logits = {split: model(torch.from_numpy(x)).numpy().astype(np.float32) for split, (x, _, _) in parts.items()}
    return logits, train_acc


# ---------------------------------------------------------------------------- files
def write_dump(path: Path, alpha: float, logits: dict, parts: dict, args) -> None:
    k = args.classes
    ids, splits, labels, sources, values = [], [], [], [], []
    for split in ("val", "test"):
        _, y, source = parts[split]
        ids.extend(f"{split}/{i:06d}" for i in range(len(y)))
        splits.extend([split] * len(y))
        labels.append(y)
        sources.extend(source.tolist())
        values.append(logits[split])
    flat = np.ascontiguousarray(np.concatenate(values)).reshape(-1)
    shift = f"rotated by at most {args.shift_angle:g} rad" + (
        f" and scaled by {args.shift_scale:g}" if args.shift_scale != 1 else "")
    noise = (f"; {args.label_noise:g} of training labels and {args.eval_label_noise:g} of val/test labels "
             "redrawn uniformly" if args.label_noise or args.eval_label_noise else "; no label noise")
    recipe = {key: value for key, value in sorted(vars(args).items())
              if key not in ("out", "dry_run", "alphas", "no_summary")}
    metadata = {
        "selcal.source": "scripts/train_ls_pair.py (this repository)",
        "selcal.model": (f"MLP {args.depth}x{args.width} ReLU, {args.epochs} epochs of SGD (Nesterov, one-cycle), "
                         f"cross-entropy with label smoothing alpha={alpha:g}"),
        "selcal.dataset": (f"synthetic: {k} classes, each {args.clusters} Gaussian clusters in {args.dim} dimensions"
                           f"{noise}; {args.shift_share:g} of val/test rows from a shifted domain ({shift})"),
        "selcal.licence": "MIT (generated by this repository)",
        "selcal.source_path": "scripts/train_ls_pair.py",
        "selcal.split_method": (f"independent draws: {args.n_train} train rows (not saved), "
                                f"{args.n_val} val rows, {args.n_test} test rows; source column: clean or shifted"),
        "selcal.label_smoothing": f"{alpha:g}",
        "selcal.recipe": json.dumps(recipe, sort_keys=True),
    }
    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("split", pa.string(), nullable=False),
            pa.field("label", pa.int64(), nullable=False),
            pa.field("logits", pa.list_(pa.float32(), k), nullable=False),
            pa.field("source", pa.string(), nullable=False),
        ],
        metadata={key.encode(): value.encode() for key, value in metadata.items()},
    )
    table = pa.Table.from_arrays(
        [pa.array(ids, type=pa.string()), pa.array(splits, type=pa.string()),
         pa.array(np.concatenate(labels), type=pa.int64()),
         pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), k),
         pa.array(sources, type=pa.string())],
        schema=schema,
    )
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    back = pq.read_table(tmp)
    stored = back.column("logits").combine_chunks().flatten().to_numpy()
    assert np.array_equal(stored.view(np.uint32), flat.view(np.uint32)), "logits changed on the way to disk"
    tmp.replace(path)


def summarise(paths):
    """selcal's view of the sweep: accuracy and AURC of every score, per alpha."""
    import selcal

    result = selcal.evaluate([str(p) for p in paths], group_col="source")
    for model in result.models:
        s = model.scores
        groups = model.extra.get("groups", {})
        by_group = "  ".join(f"{g}: acc {100 * v['accuracy']:.1f}% msp {100 * v['scores']['msp']['aurc']:.2f}%"
                             for g, v in groups.items())
        print(f"{model.name:22s} acc {100 * model.accuracy:.2f}%  AURC(%): msp {100 * s['msp']['aurc']:.3f}  "
              f"max_logit {100 * s['max_logit']['aurc']:.3f}  pnorm {100 * s['pnorm']['aurc']:.3f} "
              f"(p={s['pnorm']['p']}{', fallback' if s['pnorm']['fallback'] else ''})  "
              f"temp {100 * s['temp']['aurc']:.3f}  ECE msp {100 * s['msp']['ece']:.2f}%  | {by_group}")
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alphas", default="0,0.05,0.1,0.2", help="the label-smoothing levels (default 0,0.05,0.1,0.2)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default sample_logits/)")
    ap.add_argument("--dry-run", action="store_true", help="train and print, write nothing")
    ap.add_argument("--seed", type=int, default=0, help="seed of the data (and of training, without --train-seed)")
    ap.add_argument("--train-seed", type=int, default=None,
                    help="seed of the initial weights and batch order only (default --seed): runs that differ in it "
                         "share the val/test rows; the files are then named lspair_alpha<alpha>_seed<train-seed>")
    ap.add_argument("--no-summary", action="store_true", help="skip the summary (needs selcal importable)")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--clusters", type=int, default=3, help="Gaussian clusters per class")
    ap.add_argument("--spread", type=float, default=1.0, help="std of the cluster centres (cluster std is 1)")
    ap.add_argument("--label-noise", type=float, default=0.0, help="share of training labels redrawn uniformly")
    ap.add_argument("--eval-label-noise", type=float, default=0.0, help="share of val/test labels redrawn uniformly")
    ap.add_argument("--shift-share", type=float, default=0.3, help="share of val/test rows from the shifted domain")
    ap.add_argument("--shift-angle", type=float, default=1.0, help="largest angle (radians) of the shift rotation")
    ap.add_argument("--shift-scale", type=float, default=1.0, help="scale of the shifted inputs")
    ap.add_argument("--n-train", type=int, default=20000)
    ap.add_argument("--n-val", type=int, default=3000)
    ap.add_argument("--n-test", type=int, default=6000)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    args = ap.parse_args(argv)
    alphas = [float(a) for a in args.alphas.split(",")]
    seeded = args.train_seed is not None
    if not seeded:
        args.train_seed = args.seed

    began = time.perf_counter()
    train, parts = make_data(args)
    out = args.out if not args.dry_run else Path(__import__("tempfile").mkdtemp(prefix="lspair."))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for alpha in alphas:
        logits, train_acc = train_and_predict(alpha, train, parts, args)
        path = out / (f"lspair_alpha{alpha:g}_seed{args.train_seed}.parquet" if seeded
                      else f"lspair_alpha{alpha:g}.parquet")
        write_dump(path, alpha, logits, parts, args)
        paths.append(path)
        print(f"alpha={alpha:g}: train accuracy {100 * train_acc:.2f}%  ({time.perf_counter() - began:.0f} s)")
    print(f"written to {out}")
    if not args.no_summary:
        summarise(paths)
    total = sum(p.stat().st_size for p in paths)
    note = " (dry run: temporary)" if args.dry_run else ""
    print(f"{total / 1024:.0f} kB in {len(paths)} files under {out}{note}")
    if total >= MAX_TOTAL_BYTES:
        print(f"ERROR: {total} bytes is not under {MAX_TOTAL_BYTES}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
