"""Where a problem with an input is: the one-line ``selcal:`` message of every reader
(``FILE: column 'C', row R: what is wrong; what to do``)."""

from __future__ import annotations

from ..errors import SelcalError


def location(path, column=None, row=None) -> str:
    parts = [str(path)]
    if column is not None:
        parts.append(f"column '{column}'")
    if row is not None:
        parts.append(f"line {int(row) + row.offset}" if isinstance(row, Line) else f"row {row}")
    return ": ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0]


class Line(int):
    """A row number (from 0) that messages name as the line of a text file (``row + offset``:
    2 for a CSV with its header, 1 for JSON Lines); sums with it stay lines."""

    offset: int

    def __new__(cls, row: int, offset: int):
        line = super().__new__(cls, row)
        line.offset = offset
        return line

    def __add__(self, other):
        return Line(int(self) + int(other), self.offset)

    __radd__ = __add__


def input_error(path, column, row, message: str) -> SelcalError:
    return SelcalError(f"{location(path, column, row)}: {message}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
