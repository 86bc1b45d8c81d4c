"""One model's dump (:func:`run_dump`): list, sample, split, run the model, write, resume."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone

import numpy as np

from ..._version import __version__
from ...errors import SelcalError
from .listing import (assign_split, data_fingerprint, file_sha256, list_image_folder, parse_class_map, read_labels_csv,
                      select_limit, shard_rows)
from .model import (collate, data_config_and_transform, image_dataset, import_stack, load_model, require_stack,
                    resolve_device)
from .writer import DTYPES, DumpSummary, DumpWriter, check_existing, check_output_path
from ...options import DEFAULT_BATCH_SIZE, DEFAULT_DEVICE, DEFAULT_SEED, DEFAULTS, DUMP_DTYPES


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=lambda v: list(v) if isinstance(v, tuple) else str(v))


def run_dump(model_name: str, data, out, *, pretrained: bool = False, checkpoint=None, class_map=None,
             labels_csv=None, num_classes: int | None = None, dtype: str = DUMP_DTYPES[0], val_fraction: float = DEFAULTS.val_fraction,
             seed: int = DEFAULT_SEED, batch_size: int = DEFAULT_BATCH_SIZE, workers: int | None = None, device: str = DEFAULT_DEVICE,
             limit: int | None = None, errors_path=None, overwrite: bool = False, progress=None,
             status=None, shard: tuple[int, int] | None = None, _after_batch=None) -> DumpSummary:
    """Run ``model_name`` over the images of ``data`` and write the dump ``out``.

    ``progress(done, total)`` is called as batches finish, ``status(text)`` for a message
    before slow steps (a weight download). ``shard = (i, n)`` writes only the i-th of n
    contiguous parts of the images in id order (the sample and the split are those of the
    whole folder, so the parts of a sharded dump are, row for row, the unsharded dump).
    Returns a :class:`DumpSummary`; raises :class:`SelcalError` with one line for anything
    the user must fix.
    """
    # --- options, checked before any work
    if dtype not in DTYPES:
        raise SelcalError(f"--dtype must be float32 or float16; got {dtype!r}")
    if not 0 <= val_fraction <= 1:
        raise SelcalError(f"--val-fraction must be in [0, 1], e.g. 0.2; got {val_fraction:g}")
    if batch_size < 1:
        raise SelcalError(f"--batch-size must be at least 1; got {batch_size}")
    if workers is None:
        workers = min(4, os.cpu_count() or 1)
    if workers < 0:
        raise SelcalError(f"--workers must be 0 (load in the main process) or more; got {workers}")
    if limit is not None and limit < 1:
        raise SelcalError(f"--limit must be at least 1; got {limit}")
    if num_classes is not None and num_classes < 1:
        raise SelcalError(f"--num-classes must be at least 1; got {num_classes}")
    if pretrained and checkpoint is not None:
        raise SelcalError("give --pretrained (timm's weights) or --checkpoint PATH (your weights), not both")
    if checkpoint is not None:
        checkpoint = str(checkpoint)
        if not os.path.isfile(checkpoint):
            raise SelcalError(f"{checkpoint}: no such file; --checkpoint takes a .pth, .pt, .bin or .safetensors file")
    check_output_path(out, "--out")
    if errors_path is not None:
        check_output_path(errors_path, "--errors")
    require_stack()

    # --- the images, the sample, the split
    mapping = parse_class_map(class_map) if class_map is not None else None
    if labels_csv is not None:
        listing = read_labels_csv(data, labels_csv, mapping)
    else:
        listing = list_image_folder(data, mapping, str(class_map) if class_map is not None else "--class-map")
    n_other = listing.n_other_files
    listing = listing.subset(select_limit(listing.ids, limit, seed))
    split = assign_split(listing.ids, val_fraction, seed)
    if shard is not None:
        rows = shard_rows(len(listing), *shard)
        listing, split = listing.subset(rows), split[rows]

    identity = {
        "selcal.model": model_name,
        "selcal.pretrained": "true" if pretrained else "false",
        "selcal.checkpoint_sha256": file_sha256(checkpoint) if checkpoint is not None else "",
        "selcal.num_classes_option": "" if num_classes is None else str(num_classes),
        "selcal.n_images": str(len(listing)),
        "selcal.data_sha256": data_fingerprint(listing.ids, listing.labels),
        "selcal.val_fraction": repr(float(val_fraction)),
        "selcal.seed": str(seed),
        "selcal.limit": "" if limit is None else str(limit),
        "selcal.dtype": dtype,
        **({"selcal.shard": f"{shard[0]} of {shard[1]}"} if shard is not None else {}),
    }
    summary = DumpSummary(out=str(out), n_images=len(listing), n_other_files=n_other)
    if check_existing(out, identity, overwrite):
        summary.skipped_complete = True
        return summary

    # --- the model
    torch, torchvision, timm = import_stack()
    torch_device = resolve_device(torch, device)
    model = load_model(timm, torch, model_name, pretrained=pretrained, checkpoint=checkpoint, num_classes=num_classes,
                       status=status, seed=seed)
    k = int(getattr(model, "num_classes", 0) or 0)
    if k < 1:
        raise SelcalError(f"{model_name} has no classification head (num_classes = {k}); pass --num-classes N")
    if int(listing.labels.max()) >= k:
        worst = int(np.argmax(listing.labels))
        raise SelcalError(f"{listing.ids[worst]}: label {int(listing.labels[worst])} is outside the model's "
                          f"{k} classes (0 .. {k - 1}); check --class-map/--labels, or --num-classes")
    config, transform = data_config_and_transform(timm, model)
    model = model.to(torch_device)
    if not pretrained and checkpoint is None:
        summary.warnings.append("no --pretrained or --checkpoint: the model has random weights")

    metadata = {
        "selcal.tool": f"selcal dump {__version__}",
        **identity,
        "selcal.checkpoint": checkpoint or "",
        "selcal.num_classes": str(k),
        "selcal.dataset": str(data),
        "selcal.data": str(data),
        "selcal.layout": listing.layout,
        "selcal.class_map": "" if class_map is None else str(class_map),
        "selcal.labels_csv": "" if labels_csv is None else str(labels_csv),
        "selcal.classes": _json(listing.classes) if listing.classes is not None else "",
        "selcal.split_method": (f"seeded BLAKE2b hash of id (seed {seed}): the round({val_fraction:g} x N) "
                                "smallest hashes are val, the rest test"),
        "selcal.data_config": _json(config),
        "selcal.transform": " ".join(str(transform).split()),
        "selcal.pretrained_cfg": _json(getattr(model, "pretrained_cfg", {}) or {}),
        "selcal.timm_version": timm.__version__,
        "selcal.torch_version": torch.__version__,
        "selcal.torchvision_version": torchvision.__version__,
        "selcal.device": str(torch_device),
        "selcal.batch_size": str(batch_size),
    }

    # --- the run: batches stream from the loader into row groups
    summary.device, summary.num_classes = str(torch_device), k
    loader = torch.utils.data.DataLoader(
        image_dataset(torch, listing, transform), batch_size=batch_size, shuffle=False, num_workers=workers,
        collate_fn=collate(torch), pin_memory=torch_device.type == "cuda")
    unreadable: list[tuple[str, str]] = []
    started = time.monotonic()
    writer = DumpWriter(out, k, dtype, metadata)
    try:
        done = 0
        with torch.inference_mode():
            for rows, images, bad in loader:
                unreadable.extend((listing.path(i), reason) for i, reason in bad)
                if images is not None:
                    output = model(images.to(torch_device, non_blocking=True))
                    if isinstance(output, (tuple, list)):
                        output = output[0]
                    logits = output.float().cpu().numpy()
                    if logits.shape != (len(rows), k):
                        raise SelcalError(f"{model_name} returned logits of shape {tuple(logits.shape)} for a batch "
                                          f"of {len(rows)} images; expected ({len(rows)}, {k})")
                    logits = logits.astype(DTYPES[dtype][0])
                    summary.n_nonfinite += int((~np.isfinite(logits)).any(axis=1).sum())
                    writer.write([listing.ids[i] for i in rows], split[rows], listing.labels[rows], logits)
                    if _after_batch is not None:  # a test hook (a worker killed mid-run)
                        _after_batch()
                done += len(rows) + len(bad)
                if progress is not None:
                    progress(done, len(listing))
        summary.seconds = time.monotonic() - started
        summary.rows, summary.n_unreadable = writer.rows, len(unreadable)
        if writer.rows == 0:
            first = f" (first: {unreadable[0][0]}: {unreadable[0][1]})" if unreadable else ""
            raise SelcalError(f"{data}: none of its {len(listing)} images could be read{first}")
        final = {
            "selcal.complete": "true",
            "selcal.n_rows": str(writer.rows),
            "selcal.n_unreadable": str(len(unreadable)),
            "selcal.n_nonfinite": str(summary.n_nonfinite),
            "selcal.seconds": f"{summary.seconds:.3f}",
            "selcal.created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if errors_path is not None:  # written before the dump is complete: a complete dump has its list
            from ..output import atomic_write

            with atomic_write(errors_path) as handle:
                for path, reason in unreadable:
                    handle.write(f"{path}\t{reason}\n")
            summary.errors_path = str(errors_path)
        writer.finish(final)
    except BaseException:
        writer.abort()
        raise
    if summary.n_nonfinite:
        hint = "; use --dtype float32" if dtype == "float16" else ""
        summary.warnings.append(f"{summary.n_nonfinite} rows have NaN or infinite logits (selcal evaluate refuses "
                                f"them){hint}")
    return summary
