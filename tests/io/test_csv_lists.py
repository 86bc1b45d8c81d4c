"""The small CSV files read whole (a study's manifest, a dump's labels): rows kept as written, and
every unreadable file refused in one line saying what the file must hold."""

from __future__ import annotations

import pytest

from selcal.errors import SelcalError
from selcal.io.lists import csv_rows

HOLDS = "--labels takes a CSV with the columns path,label"


def test_rows_without_the_byte_order_mark_or_blank_lines(tmp_path):
    path = tmp_path / "l.csv"
    path.write_bytes("\ufeffpath,label\n\n a.jpg ,1\n , \n\"b,c.jpg\",2\n".encode())
    assert csv_rows(path, HOLDS) == [["path", "label"], [" a.jpg ", "1"], ["b,c.jpg", "2"]]


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "l.csv: no such file; " + HOLDS),
    (lambda p: p.mkdir(), "l.csv: is a folder; " + HOLDS),
    (lambda p: p.write_text("\n , \n"), "l.csv: is empty; " + HOLDS),
    (lambda p: p.write_bytes(b"path,label\n\xff\xfe,1\n"), "l.csv: cannot be read as CSV (UnicodeDecodeError: "),
])
def test_a_file_that_cannot_be_read_is_one_line(tmp_path, make, message):
    path = tmp_path / "l.csv"
    make(path)
    with pytest.raises(SelcalError) as caught:
        csv_rows(path, HOLDS)
    assert message in str(caught.value) and "\n" not in str(caught.value)
