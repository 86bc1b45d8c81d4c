"""Row identity: the seeded hash that picks the random hold-out, and the fingerprint of a
result's evaluation data (CONVENTIONS.md, "Validation split" and "Comparisons on common ground").

A row is known by its ``id`` when the file has ids, else by its position among the rows
that can be evaluated (after dropping the ignored label and the split ``train``). Neither
depends on the row's logits, so two dumps of one data set (same ids, or same row order)
hold out the same rows whatever the model, its dtype or a constant added to its logits.
Pure functions: arrays in, arrays or strings out.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..io.base import splitmix64

__all__ = ["id_hashes", "position_hashes", "identity_hashes", "fingerprint", "same_data"]

_CHUNK_CODES = 1 << 22  # code points hashed at once (32 MB of uint64)


def _key(seed: int, purpose: str) -> np.uint64:
    """A 64-bit key of (purpose, seed), so the hold-out of seed 0 and of seed 1 are unrelated."""
    text = f"selcal.{purpose}\0{int(seed)}".encode()
    return np.uint64(int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little"))


def id_hashes(ids, seed: int, purpose: str = "holdout") -> np.ndarray:
    """A seeded 64-bit hash of each id, read as text (the integer 7 and the string ``"7"`` are one id).

    Each code point c at position j contributes splitmix64((j << 32 | c) ^ key); the sum
    (mod 2**64) and the length are mixed once more. Computed on the UCS-4 code points of a
    numpy string array, so it is vectorised and the same whatever the longest id of the file.

    Examples
    --------
    >>> h = id_hashes(np.array(["test/0001", "test/0002"]), seed=0)
    >>> bool(h[0] != h[1]), bool((id_hashes(np.array(["test/0002", "x"]), 0)[0] == h[1]))
    (True, True)
    >>> bool(id_hashes([7], 0)[0] == id_hashes(["7"], 0)[0])
    True
    """
    ids = np.asarray(ids)
    if ids.dtype.kind != "U":
        ids = ids.astype(str)
    ids = np.ascontiguousarray(ids)
    n, width = ids.size, max(ids.dtype.itemsize // 4, 1)
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out
    codes = ids.view(np.uint32).reshape(n, -1) if ids.dtype.itemsize else np.zeros((n, 1), np.uint32)
    key = _key(seed, purpose)
    shifted = np.arange(width, dtype=np.uint64) << np.uint64(32)
    step = max(1, _CHUNK_CODES // width)
    with np.errstate(over="ignore"):
        for start in range(0, n, step):
            chunk = codes[start:start + step].astype(np.uint64)
            present = chunk != 0  # numpy pads with (and strips trailing) NULs
            mixed = np.where(present, splitmix64((shifted | chunk) ^ key), np.uint64(0)).sum(axis=1, dtype=np.uint64)
            length = present.sum(axis=1).astype(np.uint64)
            out[start:start + step] = splitmix64(mixed ^ splitmix64(length ^ key))
    return out


def position_hashes(n: int, seed: int, purpose: str = "holdout") -> np.ndarray:
    """A seeded 64-bit hash of each row position 0 .. n-1.

    >>> h = position_hashes(5, seed=0)
    >>> bool(np.array_equal(h[:3], position_hashes(3, seed=0))), len(set(h.tolist()))
    (True, 5)
    """
    key = _key(seed, purpose + ".position")
    with np.errstate(over="ignore"):
        return splitmix64(splitmix64(np.arange(n, dtype=np.uint64) ^ key))


def identity_hashes(n: int, ids, seed: int, purpose: str = "holdout") -> np.ndarray:
    """The hold-out hash of n rows: of their ids when given (None: of their positions)."""
    if ids is None:
        return position_hashes(n, seed, purpose)
    if len(ids) != n:
        raise ValueError(f"{len(ids)} ids for {n} rows")
    return id_hashes(ids, seed, purpose)


def _hex(value) -> str:
    return f"{int(value):016x}"


def fingerprint(labels, ids=None) -> dict:
    """What a result was evaluated on: ``{"rows": N, "labels": hex, "ids": hex}`` (``ids`` only
    when the rows have ids), stored in every model's JSON (CONVENTIONS.md, "Comparisons on
    common ground"). Two results were evaluated on the same rows exactly when their fingerprints
    are equal (but for a 2**-64 chance).

    Without ids, ``labels`` is the first 64 bits of the SHA-256 of the labels in row order
    (int64, little-endian). With ids, the rows are known by id, so both hashes ignore the order:
    ``labels`` = Σ splitmix64(h(id) ^ splitmix64(label)) and ``ids`` = Σ h(id) (sums mod 2**64,
    h = :func:`id_hashes` with seed 0 and purpose "fingerprint"): the labels in id order,
    without sorting.

    Examples
    --------
    >>> a = fingerprint(np.array([3, 1, 2]), np.array(["x", "y", "z"]))
    >>> a == fingerprint(np.array([2, 3, 1]), np.array(["z", "x", "y"])), a["rows"]
    (True, 3)
    >>> fingerprint(np.array([3, 1, 2]))["labels"] == fingerprint(np.array([1, 3, 2]))["labels"]
    False
    """
    labels = np.ascontiguousarray(np.asarray(labels, dtype="<i8"))
    out: dict = {"rows": int(labels.size)}
    if ids is None:
        out["labels"] = hashlib.sha256(labels.tobytes()).hexdigest()[:16]
        return out
    hashed = id_hashes(ids, 0, "fingerprint")
    with np.errstate(over="ignore"):
        out["labels"] = _hex(splitmix64(hashed ^ splitmix64(labels.view(np.uint64))).sum(dtype=np.uint64))
        out["ids"] = _hex(hashed.sum(dtype=np.uint64))
    return out


def same_data(a: dict | None, b: dict | None) -> bool | None:
    """Whether two fingerprints name the same rows; None when either is missing (an older result)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    return all(a.get(key) == b.get(key) for key in ("rows", "labels", "ids"))
