"""Which rows are fitted on and which evaluated (the split rule of CONVENTIONS.md), where they come
from (provenance, names), and the checks and warnings about them (ids, leaks, sizes).
"""

from __future__ import annotations

from collections.abc import Callable
import math
import os

import numpy as np

from .. import scores
from ..errors import SelcalError, said
from .identity import identity_hashes
from ..io import Dump, fdshifts, lmeval
from ..io.base import splitmix64
from ..io.parts import SPLIT_NAMES_KEY
from ..io.text import stem_of as text_stem
from ..options import Options

__all__ = ["SharedRows", "check_ids", "content_hashes", "count_shared_rows", "holdout_mask", "image_holdout_mask", "leak_warnings", "pixel_provenance", "row_hashes", "split_column_warnings", "split_plan", "split_rows", "split_warnings"]


_PRIMED: list[bool] = []


def prime_allocator() -> None:
    """Free one 31 MiB block, once per process, before the first pass over logits.

    glibc serves a block above its mmap threshold (128 KiB at first) by a fresh mmap, whose pages
    fault again on first use, and raises the threshold to the size of the largest such block freed
    (up to 32 MiB). Before any pass frees one (the readers fill one buffer), every chunk temporary
    of the fits and the reduction was a fresh mmap that faults again on first use (measured in
    bench/README.md). The numbers do not change; elsewhere it is one untouched allocation.
    """
    if not _PRIMED:
        _PRIMED.append(True)
        block = np.empty(31 << 20, dtype=np.uint8)
        del block


# ------------------------------------------------------------------------ splitting
_MASK64 = (1 << 64) - 1


def row_hashes(logits: np.ndarray, labels: np.ndarray, seed: int) -> np.ndarray:
    """A seeded 64-bit hash of each row's content (logits as float64, label): the leak check
    and the subsampling of large dumps use it; the hold-out never does (it hashes the row's
    identity, :mod:`selcal.pipeline.identity`)."""
    rng = np.random.default_rng(seed)
    multipliers = rng.integers(0, 2**63, size=logits.shape[1], dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    label_multiplier = np.uint64(int(rng.integers(0, 2**63)) * 2 + 1)
    out = np.empty(labels.size, dtype=np.uint64)
    step = max(1, scores.CHUNK_ELEMENTS // logits.shape[1])
    with np.errstate(over="ignore"):
        for start in range(0, labels.size, step):
            chunk = logits[start:start + step].astype(np.float64) + 0.0  # -0.0 -> 0.0
            bits = splitmix64(chunk.view(np.uint64))
            mixed = (bits * multipliers).sum(axis=1, dtype=np.uint64)
            mixed += labels[start:start + step].astype(np.uint64) * label_multiplier
            out[start:start + step] = splitmix64(mixed)
    return out


def holdout_mask(n_rows: int, ids: np.ndarray | None, fraction: float, seed: int, where: str = "") -> np.ndarray:
    """Boolean mask of the round(fraction * N) rows held out for validation: the smallest
    seeded hashes of the rows' identity (their ids, else their positions; never their content),
    so dumps of one data set hold out the same rows whatever their logits (CONVENTIONS.md,
    "Validation split")."""
    return lowest_hashes(identity_hashes(n_rows, ids, seed), fraction, where)


def lowest_hashes(hashes: np.ndarray, fraction: float, where: str = "") -> np.ndarray:
    """Mask of the round(fraction * N) rows with the smallest hashes."""
    n = hashes.size
    n_val = int(math.floor(fraction * n + 0.5))
    if n_val < 1 or n_val > n - 1:
        raise SelcalError(
            (f"{where}: " if where else "") + f"a random hold-out of {fraction:g} x {n} rows leaves no validation or no evaluation rows; "
            f"give a larger file, {said('val', metavar='FILE')}, or a split column"
        )
    mask = np.zeros(n, dtype=bool)
    mask[np.argsort(hashes, kind="stable")[:n_val]] = True
    return mask


def rows_of(dump: Dump, wanted: str) -> Dump:
    """The rows of ``dump`` whose split is ``wanted``, or all rows when it has no such rows."""
    if dump.split is None:
        return dump
    mask = dump.split == wanted
    return dump.subset(mask) if mask.any() else dump


def split_plan(split: np.ndarray | None, has_val_file: bool, needs_validation: bool,
               holdout: Callable[[], np.ndarray]) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """(rule, validation-row mask, evaluation-row mask) over the TEST rows, by the precedence of
    CONVENTIONS.md: a --val file, else the split column, else a hold-out (``holdout()`` gives
    its mask). A mask of None means no such rows (validation) or every row (evaluation).
    The one place the rule is written; both evaluation paths follow it.
    """
    if has_val_file:
        has_test_rows = split is not None and (split == "test").any()
        return "val-file", None, (split == "test") if has_test_rows else None
    if split is not None:
        is_val = split == "val"
        if is_val.any() and (~is_val).any():
            return "split-column", is_val, ~is_val
    if not needs_validation:
        return "none", None, None
    val_mask = holdout()
    return "holdout", val_mask, ~val_mask


def rule_name(rule: str, by_image: bool, metadata: dict) -> str:
    """The reported split rule: a hold-out of pixel rows is by image; a split column that the
    parts' file or folder names gave is ``split-names``."""
    if rule == "holdout" and by_image:
        return "image-holdout"
    if rule == "split-column" and (metadata or {}).get(SPLIT_NAMES_KEY):
        return "split-names"
    return rule


def check_same_classes(test_path: str, test_classes: int, val_path: str, val_classes: int) -> None:
    if max(val_classes, 2) != max(test_classes, 2):  # one binary logit is K = 2
        raise SelcalError(f"{val_path}: has K = {val_classes} classes but {test_path} has K = {test_classes}; "
                          "pass the validation file of the same model")


def image_holdout_mask(images: np.ndarray, names: np.ndarray, fraction: float, seed: int, where: str = "") -> np.ndarray:
    """Row mask of the pixel rows held out for validation: those of a seeded ``fraction`` of
    the images that have rows (chosen by a hash of the image id, independent of order)."""
    from ..io.segmentation import image_holdout

    present = np.unique(images)
    try:
        chosen = image_holdout(names[present], fraction, seed)
    except ValueError:
        raise SelcalError((f"{where}: " if where else "") + f"a random hold-out of {fraction:g} x {present.size} "
                          f"images leaves no validation or no evaluation images; give more images or {said('val', metavar='FOLDER/')}"
                          ) from None
    by_image = np.zeros(names.size, dtype=bool)
    by_image[present[chosen]] = True
    return by_image[images]


def split_rows(test: Dump, val: Dump | None, options: Options,
               by_position: bool = False, needs_validation: bool | None = None) -> tuple[Dump | None, Dump, str]:
    """(validation rows, evaluation rows, rule) of an in-memory dump (see :func:`split_plan`).

    Pixel rows of images (``test.images``) are held out by image, never by pixel (rule
    ``image-holdout``); other rows by their ids, or by position when there are none or
    ``by_position`` says the ids are only row numbers selcal made. ``needs_validation``
    (default: whether a chosen score is fitted) asks for validation rows even when no score is
    fitted (``selcal threshold`` calibrates on them).
    """
    if val is not None:
        check_same_classes(test.path, test.num_classes, val.path, val.num_classes)
    if test.images is not None:
        holdout = lambda: image_holdout_mask(test.images, test.image_names, options.val_fraction,  # noqa: E731
                                             options.seed, where=test.path)
    else:
        holdout = lambda: holdout_mask(len(test), None if by_position else test.ids,  # noqa: E731
                                       options.val_fraction, options.seed, where=test.path)
    if needs_validation is None:
        needs_validation = options.needs_validation
    rule, val_mask, eval_mask = split_plan(test.split, val is not None, needs_validation, holdout)
    rule = rule_name(rule, test.images is not None, test.metadata)
    val_rows = rows_of(val, "val") if val is not None else None if val_mask is None else test.subset(val_mask)
    return val_rows, test if eval_mask is None else test.subset(eval_mask), rule


def check_ids(test_path: str, test_ids, val_path: str | None = None, val_ids=None, test_split=None,
              val_split=None, *, column: str = "column 'id', ") -> None:
    """Refuse duplicate ids within a file (within one split of it, when it has a split column);
    ``column``: how the message names the ids after the path (nothing for the Python argument ``ids``).

    Ids are unique within a file only: a --val file may reuse its TEST file's ids (both
    often hold row numbers 0 .. N-1), and so may the val and test rows of one file; a real
    leak is found by content instead (:func:`count_shared_rows`).
    """
    for path, ids, split in ((test_path, test_ids, test_split), (val_path, val_ids, val_split)):
        if ids is None:
            continue
        keys = ids if split is None else np.char.add(np.char.add(split.astype(str), "\x00"), ids.astype(str))
        unique, counts = np.unique(keys, return_counts=True)
        if (counts > 1).any():
            rows = np.flatnonzero(keys == unique[counts > 1][0])[:2].tolist()
            where = "" if split is None else f" of the split '{split[rows[1]]}'"
            raise SelcalError(f"{path}: {column}row {rows[1]}: id {str(ids[rows[1]])!r} also at row "
                              f"{rows[0]}{where}; every row needs its own id")


_LEAK_SEED = 0
_PROBE_COLUMNS = 8


def content_hashes(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's content (logits and label), to find rows present in two files."""
    return row_hashes(logits, labels, _LEAK_SEED)


def _probe_keys(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A cheap 64-bit key of each row: its label and eight of its logits (evenly spaced, the first
    and the last among them; every logit when K <= 8).

    Rows with equal content have equal keys, so only rows whose keys match need their whole
    content hashed: O(N) work instead of O(N x K) when, as usual, no row is shared. (Eight, not
    three: the repeats of keys also estimate how often contents coincide by chance, see
    :class:`SharedRows`, and a saturated row is 0 in most columns; the time is the same.)
    """
    columns = np.unique(np.linspace(0, logits.shape[1] - 1, _PROBE_COLUMNS).round().astype(np.int64))
    return row_hashes(logits[:, columns], labels, _LEAK_SEED + 1)


def _members(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_unique)`` for a sorted array of unique keys, by binary search (isin sorts
    both arrays on every call: most of the leak check's time, chunk after chunk)."""
    if not sorted_unique.size:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_unique, values), sorted_unique.size - 1)
    return sorted_unique[at] == values


class _KeyCounts:
    """How many times each 64-bit key was added (0, 1, 2, or 3 for three or more: what the repeats A
    and B ask), for keys added in batches: sorted runs of (key, count), two runs merged when the older
    is at most twice the newer, so there are O(log N) runs and each key is merged O(log N) times
    (9 bytes per distinct key; a dict of Python ints took more than ten times that).
    """

    def __init__(self):
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []

    def counts(self, keys: np.ndarray) -> np.ndarray:
        """The counts so far of ``keys`` (3: three or more)."""
        out = np.zeros(keys.size, dtype=np.int64)
        for run_keys, run_counts in self.runs:
            at = np.minimum(np.searchsorted(run_keys, keys), run_keys.size - 1)
            found = run_keys[at] == keys
            out[found] += run_counts[at[found]]
        return np.minimum(out, 3)

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Add ``counts`` to the sorted unique ``keys``."""
        if not keys.size:
            return
        self.runs.append((keys, np.minimum(counts, 3).astype(np.uint8)))
        while len(self.runs) > 1 and self.runs[-2][0].size <= 2 * self.runs[-1][0].size:
            (newer, newer_counts), (older, older_counts) = self.runs.pop(), self.runs.pop()
            at = np.searchsorted(older, newer)  # a merge of two sorted runs, without sorting again
            found = at < older.size
            found[found] = older[at[found]] == newer[found]
            older_counts[at[found]] = np.minimum(older_counts[at[found]] + newer_counts[found], 3)
            self.runs.append((np.insert(older, at[~found], newer[~found]),
                              np.insert(older_counts, at[~found], newer_counts[~found])))


class SharedRows:
    """The validation rows, indexed to find evaluation rows that are also validation rows (a leak).

    Rows with equal content (logits and label) are evidence that one row is in both files only when
    that content *identifies* a row: it occurs once among the evaluation rows and once among the
    validation rows. A content repeated within a file (the K one-hot rows of a saturated probability
    dump, a float16 row rounded to the same values as others) says nothing about where a row came
    from, so its rows are not counted. Where contents do repeat, identifying contents can still
    coincide by chance; their expected number is estimated from the repeats within the files (the
    Poisson model below), and the shared rows are reported only when they exceed it clearly
    (CONVENTIONS.md, "Leaks"):

    * a content with expected counts λ (evaluation, n rows) and μ (validation, m rows) is shared
      by chance with probability λ e^{-λ} μ e^{-μ}; seen twice in one file and never in the other with
      probability λ²/2 e^{-λ-μ} (resp. μ²/2 e^{-λ-μ}). With μ = λ m/n (both files drawn from the same
      rows, r = n/m), E[shared] = 2r (E[A] + E[B]) / (r² + 1), where A counts the contents seen
      exactly twice among the evaluation rows and never among the validation rows, B the converse;
    * the count of identifying shared rows, S, is reported when S > C + 3 √C, C that estimate (A and
      B are counted on the rows' probe keys: label and eight logits). When no content repeats,
      C = 0 and every shared identifying row is reported.

    The evaluation rows are given in chunks (:func:`count_shared_rows`, which returns the change of
    the reported count, so the sum over the chunks is the count of all of them). One instance per
    pass over the evaluation rows.

    Examples
    --------
    >>> import numpy as np
    >>> val = np.eye(3)[[0, 1, 2, 0, 1, 2]]                  # one-hot rows: every content repeats
    >>> test = np.eye(3)[[0, 1, 2, 2, 1, 0]]
    >>> count_shared_rows(test, np.arange(6) % 3, SharedRows(val, np.arange(6) % 3))
    0
    >>> rows = np.random.default_rng(0).normal(size=(6, 3))  # unique rows, two of them leaked
    >>> count_shared_rows(rows, np.zeros(6, int), SharedRows(rows[[1, 4]], np.zeros(2, int)))
    2
    """

    def __init__(self, logits: np.ndarray, labels: np.ndarray):
        self.logits, self.labels = logits, labels
        self.keys = _probe_keys(logits, labels) if labels.size else np.empty(0, dtype=np.uint64)
        self.unique_keys, key_counts = np.unique(self.keys, return_counts=True)
        self.val_doubles = self.unique_keys[key_counts == 2]  # probe keys seen twice among the validation rows
        m = labels.size
        self._hashed = np.zeros(m, dtype=bool)  # validation rows whose content hash is known (lazily)
        self._content = np.zeros(m, dtype=np.uint64)
        self._in_val = np.zeros(m, dtype=np.int64)  # validation rows of the row's content (b)
        self._in_eval = np.zeros(m, dtype=np.int64)  # evaluation rows of the row's content so far (a)
        self.n_eval = 0
        self._eval_keys: list[np.ndarray] | None = []  # every evaluation probe key, until counts are needed
        self._eval_counts = _KeyCounts()  # evaluation rows of each probe key, once needed
        self._eval_doubles = 0  # A: probe keys seen twice among the evaluation rows, never among the validation rows
        self._val_doubles_unseen = self.val_doubles.size  # B: the converse
        self._identifying = 0  # contents found once among the evaluation rows and once among the validation rows
        self.reported = 0

    def count(self, eval_logits: np.ndarray, eval_labels: np.ndarray) -> int:
        """Add a chunk of evaluation rows; the change of the reported count of shared rows."""
        if not eval_labels.size or not self.labels.size:
            return 0
        self.n_eval += eval_labels.size
        keys = _probe_keys(eval_logits, eval_labels)
        if self._eval_keys is not None:
            self._eval_keys.append(keys)
        else:
            self._count_keys(keys)
        candidates = _members(keys, self.unique_keys)
        if candidates.any():
            self._match(keys[candidates], content_hashes(eval_logits[candidates], eval_labels[candidates]))
        shared = self._identifying
        if shared:
            if self._eval_keys is not None:  # the repeats within the evaluation rows are needed from now on
                stored, self._eval_keys = np.concatenate(self._eval_keys), None
                self._count_keys(stored)
            chance = self._by_chance()
            if shared <= chance + 3.0 * math.sqrt(chance):
                shared = 0
        change, self.reported = shared - self.reported, shared
        return change

    def _match(self, keys: np.ndarray, hashes: np.ndarray) -> None:
        """Count the evaluation rows (probe ``keys``, content ``hashes``) into the contents of the
        validation rows with the same probe keys (hashed once each: a content's rows share a key)."""
        rows = _members(self.keys, np.unique(keys))
        new = rows & ~self._hashed
        if new.any():
            contents = content_hashes(self.logits[new], self.labels[new])
            _, inverse, counts = np.unique(contents, return_inverse=True, return_counts=True)
            self._content[new], self._in_val[new], self._hashed[new] = contents, counts[inverse.ravel()], True
        unique, counts = np.unique(hashes, return_counts=True)
        rows = np.flatnonzero(rows)
        at = np.minimum(np.searchsorted(unique, self._content[rows]), unique.size - 1)
        found = unique[at] == self._content[rows]
        self._in_eval[rows[found]] += counts[at[found]]
        self._identifying = int(np.count_nonzero((self._in_val == 1) & (self._in_eval == 1)))  # one row in each

    def _count_keys(self, keys: np.ndarray) -> None:
        """Update the counts of the evaluation rows' probe keys and the repeats A and B."""
        unique, counts = np.unique(keys, return_counts=True)
        before = self._eval_counts.counts(unique)
        after = before + counts
        self._eval_counts.add(unique, counts)
        outside = ~_members(unique, self.unique_keys)
        self._eval_doubles += int(np.count_nonzero(outside & (after == 2)) - np.count_nonzero(outside & (before == 2)))
        self._val_doubles_unseen -= int(np.count_nonzero(_members(unique[before == 0], self.val_doubles)))

    def _by_chance(self) -> float:
        """The expected number of identifying contents shared by chance (see the class docstring)."""
        r = self.n_eval / self.labels.size
        return 2.0 * r * (self._eval_doubles + self._val_doubles_unseen) / (r * r + 1.0)


def count_shared_rows(eval_logits: np.ndarray, eval_labels: np.ndarray, val: SharedRows) -> int:
    """The evaluation rows that are also validation rows, by the rule of :class:`SharedRows`: for
    all the evaluation rows at once, their number; for the chunks of one pass, given in order to the
    same ``val``, the change of that number (their sum is the number for all of them)."""
    return val.count(eval_logits, eval_labels)


def leak_warnings(test_path: str, val_path: str, n_shared: int) -> list[str]:
    """Warnings of a --val file that is the TEST file, or shares rows with its evaluation rows."""
    warnings = []
    try:
        same = os.path.samefile(test_path, val_path)
    except OSError:
        same = False
    if same:
        warnings.append(f"{said('val', str(val_path))} is the TEST file itself")
    if n_shared:
        warnings.append(f"{n_shared} evaluation rows are also validation rows of {val_path} (same logits and "
                        f"label): the fit has seen them; pass a {said('val')} file without the TEST rows")
    return warnings


def split_column_warnings(split: np.ndarray | None) -> list[str]:
    """A split column with no 'test' rows is read as absent (see :func:`split_plan`): say so, since
    its rows are then evaluated (and, without --val, held out at random) as if they were test rows."""
    if split is None or not split.size or (split == "test").any():
        return []
    return ["the split column has no 'test' rows (only 'val'): it was ignored, and its 'val' rows are "
            "evaluated as test rows; mark the evaluation rows 'test', or give them in another file"]


def split_warnings(n_eval: int, n_fit: int | None, n_ignored: int) -> list[str]:
    """Warnings about the sizes of the split (``n_fit``: validation rows fitted on, if any)."""
    warnings = []
    if n_eval < 100:
        warnings.append(f"only {n_eval} evaluation rows: every metric is noisy")
    if n_fit is not None and n_fit < 1000:
        warnings.append(f"only {n_fit} validation rows: the fitted scores are fitted on little data")
    if n_ignored:
        warnings.append(f"{n_ignored} rows with the ignored label were dropped")
    return warnings


def split_provenance(rule: str, options: Options, val_path: str | None, binary: bool, n_ignored: int,
                n_train: int = 0, by_id: bool = False) -> dict:
    """The model-level JSON keys that say where the numbers come from (beyond schema 1)."""
    extra: dict = {"val_path": val_path}
    if rule in ("holdout", "image-holdout"):
        extra.update(val_fraction=options.val_fraction, seed=options.seed)
    if rule == "holdout":
        extra["holdout_by"] = "id" if by_id else "position"
    if binary:
        extra["binary_logit"] = True
    if n_ignored:
        extra["n_ignored"] = n_ignored
    if n_train:
        extra["n_train_dropped"] = n_train
    return extra


def pixel_provenance(metadata: dict, names: np.ndarray, images: np.ndarray, val_images: np.ndarray | None,
                     eval_images: np.ndarray, val: Dump | None) -> dict:
    """The model-level ``pixels`` JSON key of pixel rows: the sampling settings and counts of
    the folder (``selcal.pixels`` metadata), and both parts of the split in images and pixels."""
    import json

    from ..io.segmentation import PIXELS_METADATA

    try:
        out = dict(json.loads(metadata.get(PIXELS_METADATA, "{}")))
    except (ValueError, TypeError):
        out = {}
    out["eval_images"] = int(np.unique(eval_images).size)
    out["eval_pixels"] = int(eval_images.size)
    if val_images is not None:
        out["val_images"], out["val_pixels"] = int(np.unique(val_images).size), int(val_images.size)
    elif val is not None and getattr(val, "images", None) is not None:
        out["val_images"], out["val_pixels"] = int(np.unique(val.images).size), int(val.images.size)
    return out


def ensemble_provenance(metadata: dict) -> dict:
    """The members of an ensemble dump (``selcal ensemble``), from its metadata, as JSON keys."""
    import json

    text = (metadata or {}).get("selcal.ensemble")
    if not text:
        return {}
    try:
        return {"ensemble": json.loads(text)}
    except ValueError:
        return {}


_GENERIC_STEMS = {"test", "val", "valid", "validation", "logits", "eval", "dump", "output", "outputs"}


def model_name_of(path: str) -> str:
    """The file's stem; with its folder when the stem says nothing (``resnet50/test``)."""
    # A backslash separates folders only where it is the separator (Windows); on POSIX it is a
    # character of the name (``$x_y^z\\.parquet``).
    if lmeval.is_log(path):
        return lmeval.model_name(path)
    if fdshifts.is_fdshifts(path):
        return fdshifts.model_name(path)
    parts = (path.replace(os.sep, "/") if os.sep != "/" else path).rstrip("/").split("/")
    # a glob of parts (not a file whose name holds '[' or '*'): the model is their folder
    if len(parts) > 1 and set("*?[") & set(parts[-1]) and not os.path.exists(path):
        parts = parts[:-1]
    stem = parts[-1]
    for suffix in (".parquet", ".npz", ".pq", ".npy", ".pt", ".pth"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    else:
        stem = text_stem(stem)  # m.csv, m.jsonl, m.csv.gz
    if stem.lower() in _GENERIC_STEMS and len(parts) > 1 and parts[-2] not in ("", "."):
        return f"{parts[-2]}/{stem}"
    return stem


def unique_names(paths: list[str], given: list | None = None) -> list[str]:
    names = [name or model_name_of(p) for p, name in zip(paths, given or [None] * len(paths))]
    if len(set(names)) == len(names):
        return names
    return [p if name is None or name == model_name_of(p) else f"{p} ({name})" for p, name in zip(paths, given or names)]
