"""The commands that write dumps: ``selcal pixels`` (a segmentation folder's pixels),
``selcal ensemble`` (members averaged) and ``selcal dump`` (timm models over an image folder)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import SelcalError
from ..options import (CHOICES, DEFAULT_BATCH_SIZE, DEFAULT_DEVICE, DEFAULT_PIXELS_PER_IMAGE,
                       DEFAULT_SEGMENTATION_IGNORE, DEFAULTS, DUMP_DTYPES)
from .common import check_writable, fail, say, write_error
from .groups import FORMATS, shared
from .progress import count_bar, images_bar


def pixels(
    folder: Path = typer.Argument(..., metavar="SEGDIR", help="Folder of per-image .npz files (logits K x h x w, label H x W).", show_default=False),
    out: Path = typer.Option(..., "--out", metavar="OUT.parquet", help="The pixel dump to write.", show_default=False),
    pixels_per_image: int = typer.Option(DEFAULT_PIXELS_PER_IMAGE, "--pixels-per-image", metavar="P", help="Labelled pixels drawn per image; 0 = every labelled pixel."),
    seed: int = typer.Option(DEFAULTS.seed, help="Seed of the pixel draw (use the same --seed with evaluate)."),
    ignore_label: Optional[int] = typer.Option(None, help=f"Void label, never drawn (default {DEFAULT_SEGMENTATION_IGNORE})."),
    label_col: Optional[str] = typer.Option(None, help="Name of the label array in each .npz (default: label, else "
                                                       "labels)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
):
    """Draw pixels of a segmentation folder into an ordinary dump: logits, label, id (image/row/col), image."""
    from ..io import open_dump
    from ..io.segmentation import SegmentationSource, write_pixels

    try:
        if not folder.is_dir():
            raise SelcalError(f"{folder}: not a folder; give a folder of per-image .npz files")
        check_writable(out)
        source = open_dump(str(folder), label_col=label_col, ignore_label=ignore_label,
                           pixels_per_image=pixels_per_image, seed=seed)
        if not isinstance(source, SegmentationSource):
            raise SelcalError(f"{folder}: holds no .npz files (or also Parquet files); give a folder of per-image "
                              ".npz files")
        from ..writers.output import classify
        classify(out, inputs=[str(f) for f in source.files])  # never an image of the folder (also via a link)
        with count_bar("images", enabled=not quiet) as progress:
            rows = write_pixels(source, out, progress=progress)
    except SelcalError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(write_error(exc, out))
    if not quiet:
        say(f"selcal: wrote {out}: {rows} pixels of {len(source.files)} images, K = {source.num_classes}")


def ensemble(
    members: List[Path] = typer.Argument(..., metavar="M1 M2 ...", help=f"Dumps of the same rows, one per member (two or more): {FORMATS}.", show_default=False),
    out: Path = typer.Option(..., "--out", metavar="ENS.parquet", help="The ensemble dump to write.", show_default=False),
    label_col: Optional[str] = shared("label_col"),
    logits_col: Optional[str] = shared("logits_col"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary."),
):
    """Average the members' softmax into one dump: logits log(mean p), columns mutual_information and disagreement."""
    from ..writers.ensemble import ensemble as combine

    try:
        check_writable(out)
        summary = combine([str(m) for m in members], str(out), label_col=label_col, logits_col=logits_col)
    except SelcalError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(write_error(exc, out))
    if not quiet:
        say(f"selcal: wrote {out}: {summary.n_rows} rows, K = {summary.num_classes}, "
            f"{len(summary.members)} members aligned by {summary.aligned_by}")
    if summary.aligned_by == "order":
        say("selcal: note: members aligned by row order (no 'id' column): row i of every member is taken to be "
            "the same example")


def dump(
    models: Optional[List[str]] = typer.Argument(None, metavar="MODEL...", help="timm model names, e.g. resnet50.a1_in1k (timm.list_models()).", show_default=False),
    data: Path = typer.Option(..., "--data", metavar="DIR", help="Image folder: DIR/CLASS/IMAGE (ImageFolder layout), or flat with --labels.", show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", metavar="OUT.parquet", help="The dump of one model (written as OUT.parquet.partial, renamed when complete).", show_default=False),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", metavar="DIR", help="Folder of the dumps of several models: DIR/MODEL.parquet, or DIR/MODEL/part-*.parquet with --shards.", show_default=False),
    models_file: Optional[Path] = typer.Option(None, "--models", metavar="FILE", help="More model names, one per line.", show_default=False),
    shards: int = typer.Option(1, "--shards", metavar="N", help="Split each model's images into N parts (one task each; with --out-dir)."),
    engine: str = typer.Option(CHOICES["engine"][0], "--engine", help="local (this process, one part after another) or ray (one Ray task per part, on RAY_ADDRESS or a local Ray)."),
    pretrained: bool = typer.Option(False, "--pretrained", help="Load timm's pretrained weights for MODEL (a download, unless cached)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", metavar="PATH", help="Load weights from a local checkpoint (.pth, .pt, .bin, .safetensors)."),
    class_map: Optional[Path] = typer.Option(None, "--class-map", metavar="FILE", help="Class folder name -> label index (JSON or text), e.g. imagenet_class_index.json."),
    labels: Optional[Path] = typer.Option(None, "--labels", metavar="CSV", help="Labels of a flat folder: CSV with the columns path,label."),
    num_classes: Optional[int] = typer.Option(None, "--num-classes", metavar="K", help="Create the model with K outputs (a checkpoint trained on other classes)."),
    dtype: str = typer.Option(DUMP_DTYPES[0], "--dtype", help="Logits dtype in the file (float16: half the size)."),
    val_fraction: float = typer.Option(DEFAULTS.val_fraction, "--val-fraction", help="Fraction of the images whose split is 'val' (by a seeded hash of the id)."),
    seed: int = typer.Option(DEFAULTS.seed, "--seed", help="Seed of the split and of the --limit sample."),
    batch_size: int = typer.Option(DEFAULT_BATCH_SIZE, "--batch-size", help="Images per forward pass."),
    workers: Optional[int] = typer.Option(None, "--workers", help="DataLoader worker processes (default: min(4, CPUs); 0 loads in the main process).", show_default=False),
    device: str = typer.Option(DEFAULT_DEVICE, "--device", help="cpu, cuda, cuda:N, or auto (cuda when available)."),
    limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="Only a seeded sample of N images, for a quick look."),
    errors: Optional[Path] = typer.Option(None, "--errors", metavar="FILE", help="List the unreadable images there: path<TAB>reason per line."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUT even if it is a complete dump, or one made with other settings."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
):
    """Run timm models over an image folder and write their logits, labels, ids and split (needs the timm extra)."""
    from ..writers import dump as dumping  # torch, torchvision and timm are imported there, when needed

    status = None if quiet else (lambda text: say(f"selcal: {text}"))
    settings = dict(pretrained=pretrained, checkpoint=checkpoint, class_map=class_map, labels_csv=labels,
                    num_classes=num_classes, dtype=dtype, val_fraction=val_fraction, seed=seed, batch_size=batch_size,
                    workers=workers, device=device, limit=limit, overwrite=overwrite)
    try:
        names = list(models or []) + (dumping.read_model_list(models_file) if models_file is not None else [])
        if out_dir is None:
            if out is None:
                raise SelcalError("give --out OUT.parquet (one model) or --out-dir DIR (several models, --shards)")
            if len(names) != 1:
                raise SelcalError(f"--out writes one model's dump but {len(names)} models were given; use --out-dir DIR")
            if shards != 1 or engine != "local":
                raise SelcalError("--shards and --engine write a folder of parts: use --out-dir DIR instead of --out")
        elif out is not None:
            raise SelcalError("give --out (one model) or --out-dir (several), not both")
        elif errors is not None:
            raise SelcalError("--errors lists one model's unreadable images: use it with --out")
    except SelcalError as exc:
        fail(str(exc))
    if out_dir is not None:
        _dump_many(dumping, names, data, out_dir, shards, engine, settings, quiet)
        return
    try:
        with images_bar(enabled=not quiet) as progress:
            summary = dumping.run_dump(names[0], data, out, errors_path=errors, progress=progress, status=status,
                                       **settings)
    except SelcalError as exc:
        fail(str(exc))
    except OSError as exc:  # a full disk or a vanished folder while writing
        fail(write_error(exc, out))
    if summary.skipped_complete:
        if not quiet:
            say(f"selcal: {out}: complete with the same settings ({summary.n_images} images); skipped "
                "(--overwrite to redo)")
        return
    for warning in summary.warnings:
        say(f"selcal: warning: {warning}")
    if not quiet:
        skipped = f", {summary.n_unreadable} unreadable images skipped" if summary.n_unreadable else ""
        if summary.n_unreadable and summary.errors_path is None:
            skipped += " (list them with --errors FILE)"
        say(f"selcal: wrote {out}: {summary.rows} rows, K = {summary.num_classes}{skipped}; "
            f"{summary.images_per_second:,.1f} images/s on {summary.device}")


def _dump_many(dumping, names, data, out_dir, shards, engine, settings, quiet) -> None:
    """``selcal dump --out-dir``: every part of every model on the engine; failures listed, exit 2 if any."""
    from ..pipeline.engines import Failure

    try:
        dumping.require_stack()
        tasks = dumping.dump_tasks(names, data, out_dir, shards=shards, **settings)
        with count_bar("parts", enabled=not quiet) as progress:
            outcomes = dumping.run_dumps(tasks, engine=engine, progress=progress)
    except SelcalError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(write_error(exc, out_dir))
    failed = 0
    for name in dict.fromkeys(names):
        parts = [(t, o) for t, o in zip(tasks, outcomes) if t.model_name == name]
        errors = [o for _, o in parts if isinstance(o, Failure)]
        for error in errors:
            say(f"selcal: error: {name}: {error.message}")
        failed += bool(errors)
        done = [o for _, o in parts if not isinstance(o, Failure)]
        if quiet or errors:
            continue
        for summary in done:
            for warning in summary.warnings:
                say(f"selcal: warning: {summary.out}: {warning}")
        where = dumping.part_path(out_dir, name, 0, shards).parent if shards > 1 else parts[0][0].out
        skipped = sum(s.skipped_complete for s in done)
        rows = sum(s.rows for s in done if not s.skipped_complete)
        note = f" ({skipped} of {len(done)} parts were complete and skipped)" if skipped else ""
        say(f"selcal: wrote {where}: {rows} rows in {len(done) - skipped} parts{note}")
    if failed:
        say(f"selcal: error: {failed} of {len(dict.fromkeys(names))} models failed; the others are complete "
            "(run the same command again to redo only what is missing)")
        raise typer.Exit(2)


