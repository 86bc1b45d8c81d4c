"""``selcal dump``: run a timm model over an image folder and write its logits as a selcal dump.

The output follows CONVENTIONS.md, "Input": one Parquet file with the columns ``id``
(the image's path relative to the data folder), ``split`` (``val``/``test``), ``label``
(int64) and ``logits`` (``fixed_size_list<float32>[K]``, or float16 with ``--dtype float16``),
and the model, its weights and every setting in the schema metadata (``selcal.*`` keys).

The package, in the order of a run:

- ``listing.py`` (pure, tested without torch): listing an image folder, parsing a class map or
  a labels CSV, choosing the ``--limit`` sample and the split by a seeded hash of each id;
- ``writer.py`` (pure): :class:`DumpWriter`, which streams row groups into
  ``OUT.parquet.partial`` and renames it to ``OUT.parquet`` only when the run is complete, and
  the resume check;
- ``model.py``: torch, torchvision and timm, imported only when needed (``selcal`` and
  ``selcal.cli`` never import them): the model, the device, the transform, the image loader;
- ``run.py``: :func:`run_dump`, one model's dump; ``tasks.py``: many models and shards on an engine.
"""

from __future__ import annotations


from .listing import (IMAGE_EXTENSIONS, Listing, assign_split, data_fingerprint, file_sha256, id_hashes,
                      list_image_folder, parse_class_map, read_labels_csv, select_limit, shard_rows)
from .model import INSTALL_HINT, load_model, require_stack
from .run import run_dump
from .tasks import DumpTask, dump_tasks, part_path, read_model_list, run_dump_task, run_dumps, safe_model_name
from .writer import DumpSummary, DumpWriter, batch_table, check_existing, read_metadata

__all__ = [
    "IMAGE_EXTENSIONS", "INSTALL_HINT", "Listing", "list_image_folder", "read_labels_csv", "parse_class_map",
    "id_hashes", "select_limit", "assign_split", "data_fingerprint", "check_existing", "batch_table",
    "DumpWriter", "DumpSummary", "run_dump", "read_metadata", "file_sha256", "require_stack", "load_model",
    "shard_rows", "safe_model_name", "part_path", "DumpTask", "run_dump_task", "dump_tasks", "read_model_list",
    "run_dumps",
]
