"""``.pt``/``.pth`` inputs (torch.save), compared with the canonical Parquet layout.

These need PyTorch: they are skipped when it is not installed (the main test venv), and fail
instead of skipping when ``SELCAL_REQUIRE_TIMM=1`` (``.ci/run`` runs this file in its timm
venv, where torch is installed). The one test of a missing torch runs everywhere.
"""

from __future__ import annotations

import builtins
import os

import numpy as np
import pytest
from helpers import PickleBomb, canonical_model, model_json, split_data

import selcal
from selcal.errors import SelcalError

N, K = 240, 5


def _torch():
    if os.environ.get("SELCAL_REQUIRE_TIMM") == "1":
        import torch  # a failure, not a skip, where torch must be installed

        return torch
    return pytest.importorskip("torch")


@pytest.fixture
def data():
    return split_data(N, K, seed=8, val_every=4)


@pytest.fixture
def canonical(dumps, data):
    return canonical_model(dumps, *data)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("suffix", [".pt", ".pth", ".PT"])
def test_a_dict_of_tensors(dumps, data, canonical, h, dtype, suffix):
    torch = _torch()
    logits, labels, split = data
    path = dumps.path(f"model_{dtype}{suffix}")
    torch.save({"logits": torch.tensor(logits).to(getattr(torch, dtype)), "labels": torch.tensor(labels),
                "split": split.tolist()}, path)
    h.assert_same_numbers(model_json(path), canonical)


def test_a_list_of_batch_dicts_is_concatenated_in_order(dumps, data, canonical, h):
    """``outputs.append({"logits": ..., "labels": ...})`` in a loop, then ``torch.save(outputs)``:
    read as the rows of every batch in list order (refused before with 'no labels'); a scalar
    per batch (the loss) is no column."""
    torch = _torch()
    logits, labels, split = data
    bounds = [0, 64, 128, 200, N]  # a short last batch
    outputs = [{"logits": torch.tensor(logits[a:b], dtype=torch.float32), "labels": torch.tensor(labels[a:b]),
                "split": split[a:b].tolist(), "loss": torch.tensor(0.5)} for a, b in zip(bounds, bounds[1:])]
    path = dumps.path("batches.pt")
    torch.save(outputs, path)
    h.assert_same_numbers(model_json(path), canonical)
    torch.save([{"logits": torch.zeros(2, K), "labels": torch.zeros(2, dtype=torch.long)},
                {"logits": torch.zeros(2, K + 1), "labels": torch.zeros(2, dtype=torch.long)}], path)
    with pytest.raises(SelcalError, match=r"column 'logits': has shapes \(2, 5\), \(2, 6\)"):
        model_json(path)


def test_logits_alone_with_a_sibling_labels_file(dumps, data, h):
    """The layout of the noisy-calibration sources: ``test_logits.pt`` + ``test_labels.npy``."""
    torch = _torch()
    logits, labels, split = data
    files = {}
    for part in ("val", "test"):
        rows = split == part
        files[part] = dumps.path(f"{part}_logits.pt")
        torch.save(torch.tensor(logits[rows], dtype=torch.float32), files[part])
        np.save(dumps.path(f"{part}_labels.npy"), labels[rows])
    reference = model_json(dumps.parquet("ref/test.parquet", logits[split == "test"], labels[split == "test"]),
                           val=dumps.parquet("ref/val.parquet", logits[split == "val"], labels[split == "val"]))
    h.assert_same_numbers(model_json(files["test"], val=files["val"]), reference)


def test_a_pair_of_logits_and_labels(dumps, data, h):
    torch = _torch()
    logits, labels, _ = data
    path = dumps.path("pair.pt")
    torch.save((torch.tensor(logits, dtype=torch.float32), torch.tensor(labels)), path)
    h.assert_same_numbers(model_json(path), model_json(dumps.parquet("pair.parquet", logits, labels)))


def test_other_label_names_and_binary_logits(dumps, data, h):
    torch = _torch()
    logits, _, split = data
    v = logits[:, 0]
    y = (v + logits[:, 1] / 3 > 0)
    reference = model_json(dumps.parquet("bin.parquet", v[:, None], y.astype(int), split=split))
    path = dumps.path("bin.pt")
    torch.save({"logit": torch.tensor(v), "target": torch.tensor(y), "split": split.tolist()}, path)
    h.assert_same_numbers(model_json(path), reference)


def test_python_objects_are_never_unpickled(dumps, data, tmp_path, cli):
    torch = _torch()
    logits, labels, _ = data
    marker = tmp_path / "ran"
    path = dumps.path("hostile.pt")
    torch.save({"logits": torch.tensor(logits), "labels": torch.tensor(labels), "x": PickleBomb(str(marker))}, path)
    result = cli("evaluate", path)
    assert result.exit_code == 2 and not marker.exists()
    assert result.stderr.startswith(f"selcal: error: {path}: not a readable .pt file (") and \
        "torch.save({'logits': logits, 'labels': labels}, path)" in result.stderr and result.stderr.count("\n") == 1


def test_a_truncated_file_is_one_line(dumps, data, cli):
    torch = _torch()
    logits, labels, _ = data
    path = dumps.path("cut.pt")
    torch.save({"logits": torch.tensor(logits), "labels": torch.tensor(labels)}, path)
    path.write_bytes(path.read_bytes()[:300])
    result = cli("evaluate", path)
    assert result.exit_code == 2 and result.stderr.startswith(f"selcal: error: {path}: not a readable .pt file")
    assert result.stderr.count("\n") == 1


def test_numpy_values_in_the_dict_are_named_not_unpickled(dumps, data, cli):
    """``list(split)`` of a numpy array holds numpy scalars, which weights_only loading refuses."""
    torch = _torch()
    logits, labels, split = data
    path = dumps.path("numpy_split.pt")
    torch.save({"logits": torch.tensor(logits), "labels": torch.tensor(labels), "split": list(split)}, path)
    result = cli("evaluate", path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "multiarray.scalar) that weights_only loading refuses" in result.stderr
    assert "plain lists of str" in result.stderr


def test_without_torch_one_line_says_what_to_install(dumps, monkeypatch):
    path = dumps.path("model.pt")
    path.write_bytes(b"PK\x03\x04 not read")
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(SelcalError) as caught:
        selcal.evaluate(str(path))
    assert str(caught.value) == (f"{path}: reading .pt files needs PyTorch (pip install torch); or save the arrays "
                                 "with numpy.savez('model.npz', logits=logits, labels=labels)")


def test_an_expanded_tensor_is_measured_by_its_shape_not_its_storage(tmp_path, cli, monkeypatch):
    """Issue 22: a .pt of a few KB holding an expanded (stride 0) tensor is refused by the memory it
    would take once copied (the bound lowered here to 1 MB), in one line, never materialised."""
    torch = _torch()
    import selcal.io.base

    path = tmp_path / "expanded.pt"
    torch.save({"logits": torch.zeros(1, 20).expand(100_000, 20),
                "labels": torch.zeros(1, dtype=torch.long).expand(100_000)}, path)
    assert path.stat().st_size < 10_000
    monkeypatch.setattr(selcal.io.base, "MAX_WHOLE_BYTES", 1 << 20)
    result = cli("evaluate", path, "--scores", "msp")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "expanded.pt" in lines[0] and "8 MB" in lines[0], result.stderr
