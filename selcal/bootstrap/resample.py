"""Drawing resamples (exact multinomial, in blocks), the metrics of each, percentile intervals."""

from __future__ import annotations

import numpy as np

from ..errors import OptionError
from ..options import DEFAULT_CONFIDENCE  # noqa: F401  (re-exported by selcal.bootstrap)
from ..metrics import catalog
from .data import RowData
from .vectorised import Prepared


_DRAW_ELEMENTS = 1 << 18  # resamples x rows (or bins) per call of the generator: fixed, the draws depend on it
_BLOCK_ELEMENTS = 1 << 20  # resamples x rows (or bins) per block measured at once: a few arrays of 8 MB each
# The most resamples --bootstrap takes. Each resample keeps one float64 per metric (about 60
# with the four default scores: 480 bytes), filled in place block by block, so the memory of
# the values is 8 x metrics x B: about 0.5 GB at this ceiling, whatever N.
MAX_RESAMPLES = 1_000_000
MODEL_LEVEL = tuple(k for k in catalog.model_level() if catalog.has_interval(k))  # accuracy, error, NLL, Brier


# ------------------------------------------------------------------------ resampling
def block_size(n: int, elements: int = _DRAW_ELEMENTS) -> int:
    return max(1, elements // max(n, 1))


def draw_resamples(n: int, resamples: int, seed: int, bins: int = 0):
    """Yield blocks of resamples, arrays of row indices of shape (block, n), from one seed.

    The same (n, resamples, seed) always yields the same indices, whatever else is computed
    (``bins``, when more than n, makes the blocks smaller: per-block arrays of resamples x
    bins stay bounded). The generator is called for :data:`_DRAW_ELEMENTS` at a time (the
    indices depend on that size), and a block yielded holds several such draws (fewer blocks:
    less of numpy's per-call work per resample; the blocks' numbers are those of their resamples).
    """
    rng = np.random.default_rng(seed)
    draw = block_size(max(n, bins))
    block = draw * max(1, block_size(max(n, bins), _BLOCK_ELEMENTS) // draw)
    for start in range(0, resamples, block):
        end = min(start + block, resamples)
        parts = [rng.integers(0, n, size=(min(draw, end - at), n), dtype=np.int64) for at in range(start, end, draw)]
        yield parts[0] if len(parts) == 1 else np.concatenate(parts)


def threads(options) -> int:
    """Threads for the blocks of resamples: ``options.workers``, else as the evaluation pass (at most 4)."""
    import os

    chosen = getattr(options, "workers", None)
    return chosen if chosen else min(4, os.cpu_count() or 1)


def in_order(measure, blocks, workers: int):
    """``measure(block)`` of every block, yielded in the blocks' order, computed on up to ``workers``
    threads (numpy's sorts, sums, gathers and FFTs run without the GIL). Each block's numbers are
    its own: the same bits on any number of threads. BLAS runs on one thread meanwhile (the blocks'
    means are exact integer sums through BLAS, the same bits either way; its own threads, spinning
    between calls, took a fifth of the CPU from the blocks' threads)."""
    from ..metrics.exact_sums import single_threaded_blas

    with single_threaded_blas():
        yield from _in_order(measure, blocks, workers)


def _in_order(measure, blocks, workers: int):
    if workers <= 1:
        for block in blocks:
            yield block, measure(block)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()
        for block in blocks:
            pending.append((block, pool.submit(measure, block)))
            if len(pending) > workers:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def resample_metrics(data: RowData, draws: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Every metric of every score on each resample ``data.take(draws[i])``, vectorised.

    Parameters
    ----------
    data : RowData
    draws : int array (b, N) of row indices, one resample per row.

    Returns
    -------
    ``{"model": {"accuracy", "error", "nll", "brier": (b,)}, score: {metric: (b,)}}``; NaN
    where a value is undefined (AUROC, FPR@95%TPR without errors or without correct rows).

    Examples
    --------
    >>> data = RowData(correct=np.array([True, True, False, False]),
    ...                scores={"s": np.array([0.9, 0.8, 0.8, 0.1])})
    >>> float(resample_metrics(data, np.array([[0, 1, 2, 3]]))["s"]["auroc"][0])
    0.875
    """
    draws = np.atleast_2d(np.asarray(draws, dtype=np.int64))
    return Prepared(data).metrics(draws)


class Values:
    """Every metric's value on each of ``resamples`` resamples, filled in place block by block.

    One float64 array of length B per metric, nothing else kept: 8 bytes per metric and
    resample (a metric missing from a block stays NaN, undefined).
    """

    def __init__(self, resamples: int):
        self.resamples, self.filled = resamples, 0
        self.values: dict[str, dict[str, np.ndarray]] = {}

    def add(self, block: dict[str, dict[str, np.ndarray]]) -> None:
        size = 0
        for level, metrics in block.items():
            for metric, values in metrics.items():
                into = self.values.setdefault(level, {}).get(metric)
                if into is None:
                    into = self.values[level][metric] = np.full(self.resamples, np.nan)
                into[self.filled:self.filled + values.size] = values
                size = values.size
        self.filled += size


def stack_blocks(blocks: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, np.ndarray]] = {}
    for level in blocks[0]:
        out[level] = {m: np.concatenate([blk[level][m] for blk in blocks]) for m in blocks[0][level]}
    return out


def percentile_interval(values: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> list[float] | None:
    """The percentile interval [q(a/2), q(1 - a/2)], a = 1 - confidence, of the defined values.

    NaN (undefined) values are left out; ``None`` when more than a/2 of them are undefined.

    Examples
    --------
    >>> percentile_interval(np.arange(5.0), 0.5)
    [1.0, 3.0]
    >>> percentile_interval(np.array([1.0, np.nan, np.nan, 2.0]), 0.9) is None
    True
    """
    values = np.asarray(values, dtype=np.float64)
    defined = values[np.isfinite(values)]
    tail = (1.0 - confidence) / 2
    if defined.size == 0 or values.size - defined.size > tail * values.size:
        return None
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    return [float(low), float(high)]


def check_arguments(resamples: int, confidence: float) -> None:
    """Refuse a bad number of resamples or level (errors name the Python arguments; the CLI its flags)."""
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer, float)) \
            or not float(resamples).is_integer() or resamples < 2:
        raise OptionError("bootstrap", "{option} takes the number of resamples, at least 2 (e.g. 1000); got "
                          + repr(resamples))
    if resamples > MAX_RESAMPLES:
        raise OptionError("bootstrap", f"{{option}} takes at most {MAX_RESAMPLES:,} resamples (each keeps a float64 "
                                       f"per metric: about 0.5 GB at the ceiling); got {resamples:,}")
    if not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise OptionError("confidence", "{option} must be between 0 and 1 (e.g. 0.95); got " + repr(confidence))
