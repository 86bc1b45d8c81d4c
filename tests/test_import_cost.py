"""What `import selcal` (and the CLI) loads: no module a Parquet user's evaluation does not need.

polars (CSV, JSON Lines and lm-evaluation-harness logs) costs about 35 MB of resident memory
and 65 ms of start-up; matplotlib is for figures only. Both are imported where they are used.
The check runs in a fresh interpreter, so that other tests' imports do not hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("polars", "matplotlib")


def loaded_after(statement: str) -> set[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.slow
@pytest.mark.parametrize("statement", ["import selcal", "import selcal.cli"])
def test_import_loads_no_heavy_optional_module(statement):
    assert not loaded_after(statement) & set(HEAVY)


@pytest.mark.slow
def test_evaluating_a_parquet_dump_loads_no_polars(tmp_path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 5)).astype(np.float32)
    table = pa.table({"logits": pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 5),
                      "label": rng.integers(0, 5, 400)})
    pq.write_table(table, tmp_path / "dump.parquet")
    loaded = loaded_after(f"import selcal; selcal.evaluate({str(tmp_path / 'dump.parquet')!r}).to_json()")
    assert "selcal" in loaded and "polars" not in loaded


@pytest.mark.slow
def test_reading_a_csv_dump_still_works_once_polars_is_imported_lazily(tmp_path):
    path = tmp_path / "dump.csv"
    path.write_text("label,logit_0,logit_1\n" + "".join(f"{i % 2},{i % 3}.5,{i % 5}\n" for i in range(200)))
    loaded = loaded_after(f"import selcal; print(selcal.evaluate({str(path)!r}).to_json()[:0])")
    assert "polars" in loaded
