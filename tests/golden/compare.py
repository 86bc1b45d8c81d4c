"""How a golden output is compared with a new one.

Exact numbers are compared byte for byte. The numbers of a score whose fit is solved by a library's
iterative solver (its registry entry's ``reproducible_to``: vector, dirichlet, ets) may move inside the
fit's certificate from one numpy/scipy release to the next, so they, and every number derived from
them, are compared within that relative tolerance; the keys that describe the solver's run
(``SOLVER_KEYS``: gradient norm, iterations) only have to satisfy the certificate.

- JSON: parsed and walked; a number under a tolerant score's name (``.../scores/vector/...``, or a dict
  whose ``score`` is that name) is compared within the tolerance, every other value exactly.
- CSV: a column whose header names a tolerant score (``aurc_vector``) within the tolerance, every other
  cell exactly.
- Text (terminal, Markdown, JUnit): the words exactly; when the file names a tolerant score, a printed
  number may differ by one unit of its last printed digit (its full-precision value is checked in the
  same run's JSON or CSV).

:func:`differences` returns the differences, empty when the files agree.
"""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal

from selcal.scores.calibrators import GRADIENT_TOLERANCE, SOLVER_KEYS
from selcal.scores import REGISTRY

TOLERANT = {name: entry.reproducible_to for name, entry in REGISTRY.items() if entry.reproducible_to}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
ABSOLUTE = 1e-12  # below this, a difference of numbers near 0 is rounding whatever the tolerance


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= max(rtol * max(abs(a), abs(b)), ABSOLUTE)


def _json(expected, got, path: str, rtol: float | None, out: list[str]) -> None:
    if isinstance(expected, dict) and isinstance(got, dict):
        if sorted(expected) != sorted(got):
            out.append(f"{path}: keys {sorted(set(expected) ^ set(got))} differ")
            return
        if rtol is None and expected.get("score") in TOLERANT:
            rtol = TOLERANT[expected["score"]]
        for key in expected:
            tol = TOLERANT[key] if rtol is None and key in TOLERANT else rtol
            if tol is not None and key in SOLVER_KEYS:
                if not isinstance(got[key], (int, float)) or (key != "iterations" and not got[key] < GRADIENT_TOLERANCE):
                    out.append(f"{path}/{key}: {got[key]!r} is not within the certificate")
                continue
            _json(expected[key], got[key], f"{path}/{key}", tol, out)
    elif isinstance(expected, list) and isinstance(got, list):
        if len(expected) != len(got):
            out.append(f"{path}: {len(expected)} items expected, {len(got)} got")
            return
        for i, (e, g) in enumerate(zip(expected, got)):
            _json(e, g, f"{path}/{i}", rtol, out)
    elif (rtol is not None and isinstance(expected, float) and isinstance(got, (int, float))
          and not isinstance(got, bool)):
        if not _close(expected, got, rtol):
            out.append(f"{path}: {expected!r} expected, {got!r} got (relative tolerance {rtol:g})")
    elif type(expected) is not type(got) or expected != got:
        out.append(f"{path}: {expected!r} expected, {got!r} got")


def _csv(expected: str, got: str, out: list[str]) -> None:
    rows_e, rows_g = list(csv.reader(io.StringIO(expected))), list(csv.reader(io.StringIO(got)))
    if len(rows_e) != len(rows_g) or not rows_e or rows_e[0] != rows_g[0]:
        out.append("the header or the number of rows differs")
        return
    tolerances = [next((tol for name, tol in TOLERANT.items() if re.search(rf"(^|_){name}($|_)", column)), None)
                  for column in rows_e[0]]
    for r, (row_e, row_g) in enumerate(zip(rows_e[1:], rows_g[1:]), start=2):
        for column, tol, e, g in zip(rows_e[0], tolerances, row_e, row_g):
            if e == g:
                continue
            if tol is not None and NUMBER.fullmatch(e) and NUMBER.fullmatch(g) and _close(float(e), float(g), tol):
                continue
            out.append(f"row {r}, column {column}: {e!r} expected, {g!r} got")


def _last_digit(e: str, g: str) -> bool:
    """Two printed numbers with the same format that differ by at most one unit of the last digit."""
    if ("." in e) != ("." in g) or ("." in e and len(e.split(".")[1]) != len(g.split(".")[1])):
        return False
    unit = Decimal(1).scaleb(-len(e.split(".")[1])) if "." in e else Decimal(1)
    return abs(Decimal(e) - Decimal(g)) <= unit


def _text(expected: str, got: str, out: list[str]) -> None:
    words_e, words_g = NUMBER.split(expected), NUMBER.split(got)
    numbers_e, numbers_g = NUMBER.findall(expected), NUMBER.findall(got)
    if words_e != words_g or len(numbers_e) != len(numbers_g):
        out.append("the text differs outside its numbers")
        return
    tolerant = any(re.search(rf"\b{re.escape(name)}\b", expected) for name in TOLERANT)
    for e, g in zip(numbers_e, numbers_g):
        if e != g and not (tolerant and _last_digit(e, g)):
            out.append(f"{e} expected, {g} got")


def differences(name: str, expected: bytes, got: bytes) -> list[str]:
    """What differs between the golden file ``name`` and a new output (empty: they agree)."""
    if expected == got:
        return []
    out: list[str] = []
    e, g = expected.decode(), got.decode()
    if name.endswith(".json"):
        _json(json.loads(e), json.loads(g), "", None, out)
    elif name.endswith(".csv"):
        _csv(e, g, out)
    else:
        _text(e, g, out)
    return out
