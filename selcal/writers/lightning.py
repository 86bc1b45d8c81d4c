"""A Lightning callback that writes the validation and test logits as a selcal dump (``selcal[lightning]``).

    from selcal.writers.lightning import SelcalDump
    trainer = Trainer(callbacks=[SelcalDump("dumps/run1", classes=10)])

At the end of every validation epoch the ``val`` part of the dump is written again (the last
epoch's logits are kept; the sanity check writes nothing), and at the end of a test epoch the
``test`` part, each through :class:`selcal.writers.training.DumpWriter`, one part per process
(``shard`` = the global rank). ``selcal evaluate dumps/run1`` then fits the fitted scores on the
``val`` rows and measures the ``test`` rows.

The rows are what ``validation_step`` and ``test_step`` return: a dict with ``logits`` and
``labels`` (and ``ids``, ``groups`` when wanted), or pass ``extract(outputs, batch) -> dict`` for
any other shape. Lightning is imported from ``lightning.pytorch`` (or the older
``pytorch_lightning``) when ``SelcalDump`` is first used, never by ``import selcal``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import SelcalError
from .training import DumpWriter

__all__ = ["SelcalDump", "KEYS"]

KEYS = ("logits", "labels", "ids", "groups")


def _from_step(outputs, batch) -> dict[str, Any]:
    """``outputs`` of a validation or test step, a dict with ``logits`` and ``labels``."""
    if not isinstance(outputs, dict) or "logits" not in outputs or "labels" not in outputs:
        raise SelcalError("SelcalDump: validation_step and test_step must return a dict with 'logits' and 'labels' "
                          f"(got {type(outputs).__name__}); or pass SelcalDump(..., extract=lambda outputs, batch: "
                          "{'logits': ..., 'labels': ...})")
    return {key: outputs[key] for key in KEYS if outputs.get(key) is not None}


def _lightning_callback():
    """Lightning's Callback class (``lightning.pytorch``, else ``pytorch_lightning``)."""
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        try:
            from pytorch_lightning.callbacks import Callback
        except ImportError:
            raise ImportError("selcal.writers.lightning.SelcalDump needs Lightning: pip install 'selcal[lightning]'"
                              ) from None
    return Callback


def _split_hooks(split: str):
    """The hooks of one split's epochs: its start opens the split's part, each batch's end adds the
    step's rows, its end closes the part."""
    def epoch_start(self, trainer, pl_module) -> None:
        self._start(trainer, split)

    def batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._add(split, outputs, batch, dataloader_idx)

    def epoch_end(self, trainer, pl_module) -> None:
        self._stop(split)

    return epoch_start, batch_end, epoch_end


def _define():
    """The class, defined on first use (importing this module never imports Lightning)."""
    Callback = _lightning_callback()

    class SelcalDump(Callback):
        """Write the validation and test logits of a Lightning run into the dump folder ``dirpath``.

        Parameters
        ----------
        dirpath : str or Path
            The dump's folder (one model: its ``val`` and ``test`` parts).
        classes : int or sequence of str, optional
            K or the classes' names (see :class:`~selcal.writers.training.DumpWriter`).
        extract : callable, optional
            ``extract(outputs, batch) -> {"logits": ..., "labels": ..., "ids": ..., "groups": ...}``;
            by default the step's own dict.
        dtype : str, optional
            The logits' type on disk (default: as the model gives them; bfloat16 as float32).
        """

        def __init__(self, dirpath, classes: int | Sequence[str] | None = None, *,
                     extract: Callable[[Any, Any], dict] | None = None, dtype: str | None = None):
            super().__init__()
            self.dirpath = Path(dirpath)
            self.classes = classes
            self.extract = extract or _from_step
            self.dtype = dtype
            self._writers: dict[str, DumpWriter] = {}

        def _start(self, trainer, split: str) -> None:
            self._stop(split, keep=False)
            if getattr(trainer, "sanity_checking", False):
                return
            self._writers[split] = DumpWriter(self.dirpath, split=split, classes=self.classes, shard=trainer.global_rank,
                                              dtype=self.dtype, metadata={"epoch": str(trainer.current_epoch)})

        def _add(self, split: str, outputs, batch, dataloader_idx: int) -> None:
            writer = self._writers.get(split)
            if writer is None:
                return
            if dataloader_idx:
                raise SelcalError("SelcalDump writes one validation and one test dataloader; this run has more "
                                  "(give each its own Trainer.validate/test call and dump folder)")
            rows = self.extract(outputs, batch)
            writer.add(rows["logits"], rows["labels"], rows.get("ids"), rows.get("groups"))

        def _stop(self, split: str, keep: bool = True) -> None:
            writer = self._writers.pop(split, None)
            if writer is not None:
                writer.close() if keep else writer.abort()

        # ------------------------------------------------------------------ Lightning's hooks
        on_validation_epoch_start, on_validation_batch_end, on_validation_epoch_end = _split_hooks("val")
        on_test_epoch_start, on_test_batch_end, on_test_epoch_end = _split_hooks("test")

        def on_exception(self, trainer, pl_module, exception) -> None:
            for split in list(self._writers):
                self._stop(split, keep=False)

    return SelcalDump


def __getattr__(name: str):
    if name == "SelcalDump":
        globals()["SelcalDump"] = _define()
        return globals()["SelcalDump"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
