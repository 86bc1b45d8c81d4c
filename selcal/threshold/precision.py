"""The precision at which ``selcal threshold`` computes the confidences it certifies (``--dtype``;
CONVENTIONS.md, "Deployment thresholds with a guarantee", "Precision").

A certificate holds for the confidences it was computed on. selcal's own (``float64``) rank a
softmax score by its log, -log1p(S), which keeps confidences within 1e-16 of 1 apart; a service
usually runs a float32 softmax, where those confidences round to a handful of values (1.0 among
them) and the decision "accept p >= θ" differs near θ (on the cross-entropy sample's 10 000 test
rows, a float32 softmax compared with the float64 threshold at r = 1% decides 181 of the about
3 800 accepted rows otherwise). With ``float32`` the confidences are computed as such a service
computes them, and the certificate is for those.

Pure functions of arrays; nothing here reads a file.
"""

from __future__ import annotations

import numpy as np

from ..errors import SelcalError, said
from ..options import THRESHOLD_DTYPES

__all__ = ["DTYPES", "DEFAULT_DTYPE", "softmax_confidence_float32", "ChunkWatcher"]

DTYPES = THRESHOLD_DTYPES
DEFAULT_DTYPE = THRESHOLD_DTYPES[0]


def softmax_confidence_float32(z: np.ndarray, beta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(max softmax probability, argmax) of softmax(β z) computed in float32 throughout.

    z is rounded to float32 (float32 logits are exact), multiplied by β rounded to float32 when
    β != 1, shifted by its row maximum, exponentiated, summed along the row (numpy's float32
    sum) and the largest probability taken: exp(0) / sum = 1 / sum, one float32 division, the
    value a float32 ``softmax(...).max()`` gives. The argmax is the first largest of the float32
    values.

    Examples
    --------
    >>> p, pred = softmax_confidence_float32(np.array([[0.0, 0.0], [30.0, 0.0]]))
    >>> p.dtype.name, p.tolist(), pred.tolist()
    ('float32', [0.5, 1.0], [0, 0])
    """
    z32 = np.asarray(z, dtype=np.float32)
    if beta != 1.0:
        z32 = z32 * np.float32(beta)
    pred = np.argmax(z32, axis=1)
    shifted = z32 - z32[np.arange(z32.shape[0]), pred][:, None]
    total = np.exp(shifted).sum(axis=1, dtype=np.float32)
    return np.float32(1.0) / total, pred


class ChunkWatcher:
    """What ``selcal threshold`` needs of each row beyond evaluate's pass, collected chunk by chunk
    while that pass reads the same chunks (:meth:`watch`), in the chunks' order: the model's
    prediction (the argmax of the logits as read, ``float64``, or of the float32 logits), and with
    ``softmax`` (a score entry's hook, ``(terms, state) -> (z, beta, pred)``) the float32
    confidence. ``state`` gives the fitted state once the fit is done (the chunks are read after it).
    """

    def __init__(self, *, softmax=None, state=lambda: None, dtype: str = DEFAULT_DTYPE, where: str = ""):
        self._softmax, self._state, self._dtype, self._where = softmax, state, dtype, where
        self._seen = 0  # rows watched so far
        self._confidence: list[np.ndarray] = []
        self._pred: list[np.ndarray] = []
        self._labels: list[np.ndarray] = []

    def watch(self, chunks):
        from ..scores.functions import ChunkTerms

        for logits, labels in chunks:
            logits = np.asarray(logits)
            with np.errstate(over="ignore"):  # (-1e39 is -inf in float32, harmless; +1e39 is refused below)
                self._pred.append(np.argmax(logits.astype(self._dtype, copy=False), axis=1))
            self._labels.append(np.asarray(labels))
            if self._softmax is not None:
                z, beta, _ = self._softmax(ChunkTerms(np.asarray(logits, dtype=np.float64)), self._state())
                with np.errstate(over="ignore", invalid="ignore"):
                    confidence = softmax_confidence_float32(z, beta)[0]
                self._refuse_overflow(confidence, logits)
                self._confidence.append(confidence)
            self._seen += len(logits)
            yield logits, labels

    def _refuse_overflow(self, confidence: np.ndarray, logits: np.ndarray) -> None:
        """A row whose float32 softmax is NaN: a finite float64 logit (or β z) beyond float32's range,
        which a float32 service makes inf too; nothing can be certified for it at that precision."""
        bad = np.flatnonzero(~np.isfinite(confidence))
        if bad.size:
            row = int(bad[0])
            raise SelcalError(f"{self._where}: row {self._seen + row} of the rows scored: its largest logit "
                              f"{np.max(logits[row]):g} (times the score's scale) is beyond float32's range "
                              f"(3.4e38), and a float32 softmax of it is NaN; use {said('dtype', 'float64')} for these logits")

    def predictions(self) -> np.ndarray:
        """The predicted class of every row seen (int64)."""
        return np.concatenate(self._pred).astype(np.int64) if self._pred else np.empty(0, dtype=np.int64)

    def float32_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(float32 confidence as float64 values, correct by the float32 prediction) of every row seen."""
        if not self._confidence:
            return np.empty(0), np.empty(0, dtype=bool)
        labels = np.concatenate(self._labels)
        return np.concatenate(self._confidence).astype(np.float64), self.predictions() == labels
