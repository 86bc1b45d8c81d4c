"""A training loop writes its dump: a plain PyTorch loop on a tiny model, then a Lightning run with the
``SelcalDump`` callback; ``selcal evaluate`` reads each dump with no option, equal to the tensors the
model gave (float32, bfloat16, float16). Skipped without torch (CI's second venv has torch and
Lightning: .ci/run)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import selcal
from selcal.io import read_dump

if os.environ.get("SELCAL_REQUIRE_TIMM"):
    import torch
else:
    torch = pytest.importorskip("torch")


def blobs(n: int, seed: int, k: int = 4, d: int = 8):
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(k, d, generator=torch.Generator().manual_seed(0)) * 2
    labels = torch.randint(0, k, (n,), generator=generator)
    return centres[labels] + torch.randn(n, d, generator=generator), labels


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x, y = blobs(512, 1)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(30):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimiser.step()
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_plain_pytorch_loop_writes_a_dump_selcal_evaluate_reads(tmp_path, dtype):
    model = tiny_model()
    given = {}
    for split, seed in (("val", 2), ("test", 3)):
        x, y = blobs(300, seed)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y, torch.arange(300)), batch_size=64)
        tensors = []
        with torch.no_grad(), selcal.DumpWriter(tmp_path / "run", split=split, classes=4) as writer:
            for inputs, labels, index in loader:
                logits = model(inputs).to(dtype).requires_grad_(False)
                writer.add(logits, labels, ids=index)
                tensors.append(logits)
        given[split] = (torch.cat(tensors).float().numpy().astype(np.float64), y.numpy())
    dump = read_dump(str(tmp_path / "run"))
    test = dump.split == "test"
    assert np.array_equal(dump.logits[test].astype(np.float64), given["test"][0])  # the tensors' values, exactly
    assert np.array_equal(dump.labels[test], given["test"][1])
    stored = {torch.float32: np.float32, torch.bfloat16: np.float32, torch.float16: np.float16}[dtype]
    assert dump.logits.dtype == stored
    result = selcal.evaluate(str(tmp_path / "run"))
    model_result = result.models[0]
    assert (model_result.n_val, model_result.n_eval) == (300, 300)
    expected = selcal.evaluate_arrays(given["test"][0], given["test"][1], given["val"][0], given["val"][1])
    assert model_result.scores["temp"]["aurc"] == expected.scores["temp"]["aurc"]
    assert model_result.accuracy > 0.5  # the tiny model learned something: the dump is its, not noise


def test_a_lightning_run_writes_the_last_validation_and_the_test_logits(tmp_path):
    if os.environ.get("SELCAL_REQUIRE_LIGHTNING"):
        import lightning.pytorch as pl
    else:
        pl = pytest.importorskip("lightning.pytorch")
    from selcal.writers.lightning import SelcalDump

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 4)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            return {"logits": self.net(x), "labels": y}

        test_step = validation_step

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def loader(seed, n=200):
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*blobs(n, seed)), batch_size=50)

    module = Module()
    trainer = pl.Trainer(max_epochs=2, callbacks=[SelcalDump(tmp_path / "run", classes=4)], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", num_sanity_val_steps=1)
    trainer.fit(module, loader(1, 400), loader(2))
    trainer.test(module, loader(3, 300))
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["test-00000.parquet", "val-00000.parquet"]
    dump = read_dump(str(tmp_path / "run"))
    with torch.no_grad():
        expected = {split: module.net(blobs(n, seed)[0]).numpy() for split, n, seed in (("test", 300, 3), ("val", 200, 2))}
    for split in ("test", "val"):  # the trained model's, exactly: val of the last epoch, not the sanity check
        assert np.array_equal(dump.logits[dump.split == split], expected[split]), split
    result = selcal.evaluate(str(tmp_path / "run"))
    assert (result.models[0].n_val, result.models[0].n_eval) == (200, 300)
