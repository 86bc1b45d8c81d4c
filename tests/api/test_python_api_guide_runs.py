"""Every example of the integration sections of docs/guides/python-api.md runs as written (metric
functions, frames, figures on axes, MLflow, the dump writer, the JSON Schema), in a fresh folder
with the sample dumps; an example needing an optional package is skipped without it."""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "python-api.md"
FIRST = "## Metric functions"  # the integration sections start here


def examples() -> list[tuple[str, str]]:
    text = GUIDE.read_text(encoding="utf-8")
    text = text[text.index(FIRST):]
    out = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0]
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", section, re.S)):
            out.append((f"{title} {index + 1}", block))
    return out


EXAMPLES = examples()
OPTIONAL = ("mlflow", "torch", "lightning", "jsonschema", "pandas")


@pytest.mark.slow
@pytest.mark.parametrize("code", [code for _, code in EXAMPLES], ids=[name for name, _ in EXAMPLES])
def test_the_guides_example_runs(code, tmp_path, monkeypatch):
    for package in OPTIONAL:
        if re.search(rf"^\s*(import|from) {package}\b", code, re.M) and importlib.util.find_spec(package) is None:
            pytest.skip(f"needs {package}")
    (tmp_path / "sample_logits").symlink_to(ROOT / "sample_logits")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    if "mlflow.set_tracking_uri" in code:  # the example's store is the example's: set back afterwards
        from mlflow.tracking._tracking_service import utils

        monkeypatch.setattr(utils, "_tracking_uri", utils._tracking_uri)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # (a polars comparison with None, e.g.: a wrong example)
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "__guide__"})


def test_every_integration_has_an_example():
    titles = {name.rsplit(" ", 1)[0] for name, _ in EXAMPLES}
    assert {"Metric functions (scikit-learn's convention)", "Data frames", "Figures on your axes", "MLflow",
            "Writing a dump from a training loop", "The result's JSON Schema"} <= titles
