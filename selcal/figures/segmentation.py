"""Uncertainty-rank maps of segmentation images (Xia et al. 2024, figs. 6 and 10).

Every labelled pixel (logit cell) of an image is coloured by the rank of its confidence
among all evaluated pixels of the model: errors in a sequential colour map, the most
confident errors brightest; correct pixels grey; void pixels white. One panel per score,
one row of panels per model (the same image for every model).

Two layers, as in :mod:`selcal.figures`: :func:`rank_map_data` and :func:`choose_images`
are pure functions of arrays (tested); :func:`figure_rank_maps` only draws. The logits of
the image are read again from the segmentation folder the model was evaluated on (one
image at a time); scores are computed with the model's fitted T and p.

References
----------
Xia, Laurent, Franchi, Yao, Bursuc: "Understanding Why Label Smoothing Degrades Selective
Classification and How to Fix It", 2024, figs. 6 and 10.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..scores import REGISTRY
from ..errors import SelcalError
from ..options import DEFAULT_RANK_MAPS, PLOT_FORMATS
from ..writers.output import Outputs
from ..io.segmentation import image_file, is_segmentation_folder, read_image
from .base import NAME_LIMITS, new_figure, render, safe_stem, score_label, style, user_text

__all__ = ["RankMap", "rank_map_data", "cell_scores", "choose_images", "figure_rank_maps", "write_rank_maps",
           "DEFAULT_RANK_MAPS", "MOST_CONFIDENT"]

MOST_CONFIDENT = 0.1  # images are chosen by their errors among the 10% most confident evaluated pixels
ERROR_COLOURMAP = "inferno"
CORRECT_GREY, VOID_WHITE = 0.62, 1.0


@dataclass(frozen=True)
class RankMap:
    """One panel: ``rank`` (h, w) in [0, 1], the share of evaluated pixels less confident
    than the cell (ties count one half; 1 = the most confident), NaN on void cells;
    ``error`` (h, w) bool; ``void`` (h, w) bool."""

    image: str
    score: str
    rank: np.ndarray
    error: np.ndarray
    void: np.ndarray


def rank_map_data(image: str, score: str, cell_values: np.ndarray, predictions: np.ndarray, grid: np.ndarray,
                  ignore_label: int, evaluated: np.ndarray) -> RankMap:
    """The rank map of one image and score.

    Parameters
    ----------
    cell_values : (h, w) the score of every cell. predictions, grid : (h, w) predicted and
        true label of every cell. evaluated : the score of every evaluated pixel of the model
        (all images), against which each cell is ranked.

    Examples
    --------
    >>> m = rank_map_data("a", "msp", np.array([[0.1, 0.9]]), np.array([[0, 1]]), np.array([[0, 0]]), 255,
    ...                   np.array([0.1, 0.5, 0.9, 0.95]))
    >>> m.rank.tolist(), m.error.tolist()
    ([[0.125, 0.625]], [[False, True]])
    """
    ordered = np.sort(np.asarray(evaluated, dtype=np.float64))
    values = np.asarray(cell_values, dtype=np.float64)
    below = np.searchsorted(ordered, values, side="left")
    not_above = np.searchsorted(ordered, values, side="right")
    rank = (below + 0.5 * (not_above - below)) / ordered.size
    void = grid == ignore_label
    rank = np.where(void, np.nan, rank)
    return RankMap(image=image, score=score, rank=rank, error=(predictions != grid) & ~void, void=void)


def cell_scores(logits: np.ndarray, model) -> dict[str, np.ndarray]:
    """Every score of ``model`` for the rows of ``logits`` (N, K), with its fitted state
    (``model.states``): the same values the evaluation gives those rows. Columns of the file
    read as scores are left out (an image has none)."""
    x = np.asarray(logits, dtype=np.float64)
    if x.shape[1] == 1:
        x = np.concatenate([np.zeros_like(x), x], axis=1)
    return {name: REGISTRY[name].values(x, model.states.get(name)) for name in model.scores
            if name in REGISTRY and (not REGISTRY[name].needs_fit or name in model.states)}


def choose_images(models, count: int = DEFAULT_RANK_MAPS, *, score: str | None = None) -> list[int]:
    """Indices (into the models' image ids) of the ``count`` images with the most confident
    errors: the most evaluated errors among the ceil(N / 10) most confident evaluated pixels
    (and their ties), summed
    over the models, under the first score (ties: the first image id)."""
    tally = None
    for model in models:
        name = score or next(iter(model.score_values))
        values = np.asarray(model.score_values[name], dtype=np.float64)
        top = max(1, int(np.ceil(MOST_CONFIDENT * values.size)))  # the 10% most confident (and their ties)
        threshold = np.partition(values, values.size - top)[values.size - top]
        confident_errors = (values >= threshold) & ~np.asarray(model.rows.correct, dtype=bool)
        counts = np.bincount(np.asarray(model.clusters)[confident_errors], minlength=len(model.cluster_names))
        tally = counts if tally is None else tally + counts
    order = np.lexsort((np.arange(tally.size), -tally))
    return [int(i) for i in order[:count]]


def _image_panels(model, image: str):
    """(scores -> RankMap) of one image of a model evaluated on a segmentation folder."""


    pixels = model.extra.get("pixels") or {}
    ignore = int(pixels.get("ignore_label", 255))
    logits, grid = read_image(image_file(model.path, image))
    k, h, w = logits.shape
    rows = logits.reshape(k, h * w).T
    predictions = np.argmax(rows, axis=1).reshape(h, w) if k > 1 else (rows[:, 0] > 0).astype(np.int64).reshape(h, w)
    values = cell_scores(rows, model)
    return {name: rank_map_data(image, name, v.reshape(h, w), predictions, grid, ignore,
                                model.score_values[name]) for name, v in values.items()}


def figure_rank_maps(models, image: str):
    """One figure: a row of panels per model (one per score) for ``image``."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    panels = [(model, _image_panels(model, image)) for model in models]
    n_cols = max(len(p) for _, p in panels)
    first = next(iter(panels[0][1].values()))
    h, w = first.rank.shape
    width = min(4.2 * n_cols, 18)
    figure = new_figure(width, 0.6 + len(panels) * (width / n_cols) * h / w + 0.5)
    axes = figure.subplots(len(panels), n_cols, squeeze=False)
    cmap = colormaps[ERROR_COLOURMAP]
    for row, (model, maps) in enumerate(panels):
        for col in range(n_cols):
            ax = axes[row, col]
            ax.set_axis_off()
            if col >= len(maps):
                continue
            name, panel = list(maps.items())[col]
            rgb = np.full(panel.rank.shape + (3,), CORRECT_GREY)
            rgb[panel.void] = VOID_WHITE
            rgb[panel.error] = cmap(panel.rank[panel.error])[:, :3]
            ax.imshow(rgb, interpolation="nearest")
            shown = int(panel.error.sum())
            top = int(np.count_nonzero(panel.rank[panel.error] >= 1 - MOST_CONFIDENT))
            label = score_label(name, escape=False)  # (parse_math=False)
            title = f"{user_text(model.name, NAME_LIMITS['legend'], escape=False)}: {label}" if len(models) > 1 \
                else label
            ax.set_title(f"{title}\n{shown:,} errors, {top:,} in the top {100 * MOST_CONFIDENT:g}% confidence",
                         parse_math=False, fontsize=9)
    figure.suptitle(f"Uncertainty rank of the errors in image {user_text(image, NAME_LIMITS['title'], escape=False)}"
                    " (grey: correct, white: void)",
                    parse_math=False, fontsize=10)
    bar = figure.colorbar(ScalarMappable(Normalize(0, 100), cmap), ax=axes, orientation="horizontal",
                          fraction=0.05, shrink=0.6, aspect=40)
    bar.set_label("confidence rank of an error among all evaluated pixels (%; 100 = most confident)",
                  parse_math=False)
    return figure


def write_rank_maps(result, folder, fmt: str = PLOT_FORMATS[0], *, count: int = DEFAULT_RANK_MAPS,
                    images: list[str] | None = None, outputs=None) -> list[Path]:
    """Write the rank maps of ``result``'s segmentation models into ``folder``; their paths.

    Only models evaluated on a segmentation folder have rank maps (the logits of every cell
    are read from it); ``images`` names them, else the ``count`` with the most confident errors.
    The maps appear together when all are drawn; ``outputs`` (a :class:`selcal.writers.output.Outputs`):
    stage them there instead, for the caller to commit with its other outputs.
    """
    import matplotlib


    if outputs is None:
        with Outputs() as own:
            return write_rank_maps(result, folder, fmt, count=count, images=images, outputs=own)

    models = [m for m in result.models if _from_folder(m)]
    if not models or (count == 0 and not images):
        return []
    names = models[0].cluster_names
    if any(list(m.cluster_names) != list(names) for m in models[1:]):
        raise SelcalError("rank maps of several models need the same images; evaluate the folders of one data set")
    if images:
        unknown = [i for i in images if i not in set(names.tolist())]
        if unknown:
            raise SelcalError(f"--rank-maps-of: no evaluated image {unknown[0]!r} (e.g. {names[0]!r})")
        chosen = list(images)
    else:
        chosen = [str(names[i]) for i in choose_images(models, count)]
    folder = Path(folder)
    outputs.folder(folder)
    written = []
    for image in chosen:
        with matplotlib.rc_context({**style(), "axes.grid": False}):  # the font chain of plots
            data = render(figure_rank_maps(models, image), fmt)
        path = folder / f"rank_map_{safe_stem(image)}.{fmt}"
        outputs.write(path, data)
        written.append(path)
    return written


def _from_folder(model) -> bool:


    return getattr(model, "clusters", None) is not None and is_segmentation_folder(str(model.path))
