"""Read and validate logit dumps (CONVENTIONS.md, "Input"). The only package that reads files.

One module per input kind (``npz``, ``parquet``, ...), each turning a path into a
:class:`DumpSource` that yields validated row batches (or a whole :class:`Dump`). Which
module reads a path is decided by :data:`READERS`, the registry of input kinds: the first
entry whose ``accepts(path)`` is true opens it. Every problem with a file is raised as
:class:`~selcal.errors.SelcalError` with one line naming the file, the column, the first
offending row (counted from 0) and what to do. Code past this package trusts its arrays.
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from .arrays import sibling_labels
from .base import OOD_LABEL, SPLIT_VALUES, Batch, Dump, DumpSource, input_error, expand_binary
from .confidence import ConfidenceSource, is_confidence_file
from .npy import NpySource
from .npz import NpzSource
from ..errors import SelcalError, command_line, naming_flags, said
from .probs import INPUT_KINDS
from .parquet import ParquetSource
from .segmentation import SegmentationSource, is_segmentation_folder
from .parts import PartsSource, is_glob
from .parts import accepts as _accepts_parts
from . import fdshifts, lmeval
from .text import TextSource, text_format
from .torchfile import TorchSource

__all__ = ["Dump", "Batch", "DumpSource", "read_dump", "open_dump", "expand_binary", "SPLIT_VALUES",
           "Reader", "READERS", "register_reader", "expand_input", "OOD_LABEL"]


@dataclass(frozen=True)
class Reader:
    """One input kind: ``accepts(path)`` says whether it reads the path, ``open(path, **columns)``
    returns its :class:`DumpSource` (``columns``: label_col, logits_col, ignore_label, group_col,
    and the reader's own ``settings``, e.g. pixels_per_image, seed, which only it is given); a
    reader that cannot honour a column option refuses it in one line, never ignores it."""

    name: str
    accepts: Callable[[str], bool]
    open: Callable[..., DumpSource]
    settings: tuple[str, ...] = ()


READERS: list[Reader] = []


def register_reader(reader: Reader, *, first: bool = False) -> Reader:
    """Add an input kind to :data:`READERS` (``first``: before the existing ones)."""
    READERS.insert(0, reader) if first else READERS.append(reader)
    return reader


def _suffix(*suffixes: str) -> Callable[[str], bool]:
    """``accepts`` for files whose name ends with one of ``suffixes`` (any case: ``.NPZ`` too)."""
    return lambda path: path.lower().endswith(suffixes) and os.path.isfile(path)


def _refuse_pickle(path, **_):
    raise input_error(path, None, None, "is a Python pickle; selcal does not unpickle files (loading one can run any "
                                  "code). If you trust it, load it in Python and save the arrays with "
                                  "numpy.savez('model.npz', logits=logits, labels=labels)")


def _open_confidences(path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None):
    if group_col is not None:
        raise input_error(path, None, None, "--group-col is not available for a file without logits")
    return ConfidenceSource(path, label_col, ignore_label)


register_reader(Reader(  # no logits: a confidence, a prediction and a label per row (before npz and parquet)
    "confidence", is_confidence_file, _open_confidences,
))
register_reader(Reader(  # fd-shifts raw_logits.npz / raw_output.npz (before other .npz files)
    "fd-shifts", fdshifts.is_fdshifts,
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None:
        fdshifts.FdShiftsSource(path, label_col, ignore_label, group_col, logits_col),
))
register_reader(Reader(
    "npz", _suffix(".npz"),
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None:
        NpzSource(path, label_col, ignore_label, group_col, logits_col),
))
_FILE_READERS = ("confidence", "fd-shifts", "npz", "npy", "torch", "lm-eval", "text")


def _folder_dumps(path: str) -> tuple[list[str], list[str]]:
    """(the files of a folder, those a file reader other than Parquet's reads: .npz, CSV, ...), sorted;
    names starting with ``.`` or ``_`` left out, an ``.npy`` of labels beside its logits too."""
    if not os.path.isdir(path):
        return [], []
    try:
        names = sorted(n for n in os.listdir(path) if not n.startswith((".", "_")))
    except OSError:
        return [], []
    files = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
    readers = [r for r in READERS if r.name in _FILE_READERS]
    dumps = [f for f in files if any(r.accepts(f) for r in readers)]
    labels = {sibling_labels(f) for f in dumps if f.lower().endswith(".npy")}
    return files, [f for f in dumps if f not in labels]


def _open_parts(path, **columns):
    """Parquet parts; a folder holding a dump of another kind beside them is refused (it was not read, silently)."""
    others = _folder_dumps(path)[1]
    if others:
        raise input_error(path, None, None, f"holds Parquet parts and {os.path.basename(others[0])}, a dump of another "
                          "kind that is not one of them; move it out, or give each file on its own")
    return PartsSource(path, **columns)


def single_dump(path: str) -> str | None:
    """The one dump of a folder that holds exactly one (a model's folder with its ``test.npz``; beside
    it, other files are ignored), or None: a folder of several dumps, of Parquet parts, or of
    segmentation images (an ``.npz`` with an array of 3 dimensions or more is an image's)."""
    files, dumps = _folder_dumps(path)
    if len(dumps) != 1 or any(f.lower().endswith((".parquet", ".pq")) for f in files):
        return None
    if dumps[0].lower().endswith(".npz"):
        from .npz import npz_headers

        try:
            if any(len(shape) >= 3 for shape, _ in npz_headers(dumps[0]).values()):
                return None  # a segmentation image
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            return None
    return dumps[0]


def _open_single(path, **columns):
    """The folder's one dump, opened by its own reader (with the settings that reader takes)."""
    inner = single_dump(path)
    reader = next(r for r in READERS if r.name in _FILE_READERS and r.accepts(inner))
    settings = {k: v for k, v in columns.items() if k in ("label_col", "logits_col", "ignore_label", "group_col")
                or (k in reader.settings and v is not None)}
    return reader.open(inner, **settings)


register_reader(Reader(  # a folder holding one ordinary dump (a model's folder): that dump (before segmentation)
    "one-dump-folder", lambda path: single_dump(path) is not None, _open_single,
    settings=("lm_norm", "lm_choices"),
))
register_reader(Reader(
    "segmentation", is_segmentation_folder,
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None, **settings:
        SegmentationSource(path, label_col or "label", ignore_label, group_col, **settings),
    settings=("pixels_per_image", "seed"),
))
register_reader(Reader(  # a folder or a glob of Parquet parts: one model (selcal dump --shards, Spark, Ray Data)
    "parquet-parts", _accepts_parts,
    _open_parts,
))
register_reader(Reader(
    "npy", _suffix(".npy"),
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None:
        NpySource(path, label_col, ignore_label, group_col, logits_col),
))
register_reader(Reader(
    "torch", _suffix(".pt", ".pth"),
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None:
        TorchSource(path, label_col, ignore_label, group_col, logits_col),
))
register_reader(Reader(  # lm-evaluation-harness --log_samples logs (before the other JSON Lines)
    "lm-eval", lmeval.is_log,
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None, **settings:
        lmeval.LmEvalSource(path, label_col, ignore_label, group_col, logits_col, **settings),
    settings=("lm_norm", "lm_choices"),
))
register_reader(Reader(  # CSV, TSV and JSON Lines, read with polars by row batches
    "text", lambda path: text_format(path) is not None and os.path.isfile(path),
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None:
        TextSource(path, label_col, logits_col, ignore_label, group_col),
))
register_reader(Reader("pickle", _suffix(".p", ".pkl", ".pickle"), _refuse_pickle))
register_reader(Reader(  # the default: any other file is tried as Parquet
    "parquet", lambda path: not os.path.isdir(path) and not is_glob(path),
    lambda path, *, label_col=None, logits_col=None, ignore_label=None, group_col=None:
        ParquetSource(path, label_col, logits_col, ignore_label, group_col),
))


def expand_input(path) -> list[tuple[str, dict, str | None]]:
    """The models one TEST path stands for, as (path, reader settings, model name or None): the
    path itself; for lm-evaluation-harness sample logs (a log, or a folder holding logs) one model
    per log, named ``<model folder>/<task>``, and per choice count when its questions have
    different numbers of choices (``<model folder>/<task> (K choices)``)."""
    path = str(path)
    if lmeval.is_log(path):
        logs = [path]
    elif os.path.isdir(path) and not _accepts_parts(path) and not is_segmentation_folder(path):
        logs = lmeval.find_logs(path)
    else:
        logs = []
    if not logs:
        return [(path, {}, None)]
    out = []
    for log in logs:
        counts, name = lmeval.choice_counts(log), lmeval.model_name(log)
        if len(counts) == 1:
            out.append((log, {}, name))
        else:
            out += [(log, {"lm_choices": k}, f"{name} ({k} choices)") for k in counts]
    return out


def read_dump(
    path,
    *,
    label_col: str | None = None,
    logits_col: str | None = None,
    ignore_label: int | None = None,
    group_col: str | None = None,
    **settings,
) -> Dump:
    """Read a logit dump (Parquet, ``.npz``, ``.npy``, ``.pt``) and validate it.

    Parameters
    ----------
    path : str or Path
    label_col : name of the label column; by default the one of ``label``, ``labels``,
        ``target``, ``y`` (:mod:`selcal.io.columns`).
    logits_col : name of the column holding the logits; by default found by the rules of
        :mod:`selcal.io.columns` (``logits``, ``logit_0 ..``, ``0 ..``, the only list column, ...).
    ignore_label : rows with this label are dropped and counted.
    group_col : optional column of group names for per-group breakdowns.
    """
    source = open_dump(path, label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                       group_col=group_col, **settings)
    return source.read_all()


def open_dump(path, *, label_col: str | None = None, logits_col: str | None = None, ignore_label: int | None = None,
              group_col: str | None = None, input_kind: str | None = None, ood_label: int | None = None,
              python: bool | None = None, **settings) -> "DumpSource":
    """Open a dump for reading in row batches (the schema is checked now, the rows as they come).

    ``input_kind`` (``--input``): ``logits``, ``probs`` or ``logprobs``; None detects
    probabilities (:mod:`selcal.io.probs`). ``ood_label`` (``--ood-label``): rows with this
    label belong to no class; they are read with the label :data:`~selcal.io.base.OOD_LABEL`. ``settings`` go to the readers that declare them
    (e.g. ``pixels_per_image`` and ``seed`` to segmentation folders) and are ignored by the others.
    ``python``: the source's messages name the Python arguments (``input_kind='probs'``), not the flags
    (``--input probs``); None: as :func:`selcal.errors.naming_flags` says (flags inside a ``selcal`` command).
    """
    python = not naming_flags() if python is None else python
    if input_kind is not None and input_kind not in INPUT_KINDS:
        raise SelcalError(f"{said('input_kind', python=python)} must be one of {', '.join(INPUT_KINDS)}, "
                          f"got {input_kind!r}")
    if ood_label is not None and ood_label == ignore_label:
        raise SelcalError(f"{said('ood_label', python=python)} and {said('ignore_label', python=python)} are both "
                          f"{ood_label}: a row is either dropped or counted "
                          "as an error of no class; give two values")
    path = str(path)
    if not os.path.exists(path) and not is_glob(path):
        raise input_error(path, None, None, "no such file; check the path")
    if not is_glob(path) and not os.access(path, os.R_OK):
        raise input_error(path, None, None, "cannot be read (permission denied)")
    if not is_glob(path) and not os.path.isdir(path):
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # a FIFO would block the reading library's open() for good, deaf to Ctrl-C
            what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                    else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "not a regular file")
            raise input_error(path, None, None, f"is {what}; selcal reads dumps from regular files (a Parquet file is "
                                          "read from its end first): save the dump to a file")
    reader = next((r for r in READERS if r.accepts(path)), None)
    if reader is None and is_glob(path):
        raise input_error(path, None, None, "matches no Parquet file; check the pattern")
    if reader is None:  # a folder that no reader of folders takes
        raise input_error(path, None, None, "is a folder with no dump in it; give a .parquet, .npz, .npy or .pt file, a folder of "
                    "Parquet parts, or a folder of per-image .npz files")
    own = {name: value for name, value in settings.items() if name in reader.settings and value is not None}
    with command_line(not python):  # the schema's messages name what the caller used (label_col= or --label-col)
        source = reader.open(path, label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                             group_col=group_col, **own)
    if input_kind is not None:  # else the reader's own (fd-shifts raw_output.npz: probs), or detected
        source.input_kind = input_kind
    source.ood_label, source.python = ood_label, python
    return source
