"""Small CSV files a command reads whole: a study's manifest, a dump's list of labelled images.

Not a dump (no logits): a list of rows a person wrote, read with the standard ``csv`` module
(a UTF-8 byte-order mark is dropped). A missing file, a folder, an unreadable or empty file is
refused in one line naming the file and what it must hold.
"""

from __future__ import annotations

from ..errors import SelcalError
from ..escape import printable


def csv_rows(path, holds: str) -> list[list[str]]:
    """The rows of the CSV ``path`` that are not blank (at least one: a header); ``holds`` says
    what the file must hold, e.g. ``"--labels takes a CSV with the columns path,label"``."""
    import csv

    where = printable(str(path))
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except FileNotFoundError:
        raise SelcalError(f"{where}: no such file; {holds}") from None
    except IsADirectoryError:
        raise SelcalError(f"{where}: is a folder; {holds}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise SelcalError(f"{where}: cannot be read as CSV ({type(exc).__name__}: {printable(exc)})") from None
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise SelcalError(f"{where}: is empty; {holds}")
    return rows
