"""What every figure family shares: the style, the font chain, user text, colours and labels
of the scores, a new Agg figure, and rendering a figure to bytes.

Nothing here draws a particular figure; the family modules (:mod:`.selective`,
:mod:`.reliability`, :mod:`.vmax`, :mod:`.pnorm`, :mod:`.profile`, :mod:`.sweep`,
:mod:`.segmentation`) import from here and never from each other. matplotlib is imported
only when a figure is made (:func:`mpl`), never pyplot.
"""

from __future__ import annotations

import functools
import io as _io
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..options import PLOT_FORMATS  # noqa: F401  (re-exported by selcal.figures)
from ..scores import REGISTRY

__all__ = ["PLOT_FORMATS", "NAME_LIMITS", "SCORE_LABELS", "SCORE_COLOURS", "SCORE_STYLES", "STYLE",
           "FALLBACK_FONTS", "REPLACEMENT_CHARACTER", "RenderedFigure", "user_text", "new_figure", "render",
           "safe_stem", "style", "mpl", "wrap", "on_axes", "one_model"]

# Longest user text, in characters, in a title, a legend entry and a tick label (see user_text).
NAME_LIMITS = {"title": 70, "legend": 40, "tick": 28}

class _FromRegistry:
    """A score's label, colour or line style in the figures, asked of its registry entry
    (``SCORE_LABELS["temp"]``); a column of the file read as a score has none (its label: its name)."""

    def __init__(self, field: str):
        self.field = field

    def _of(self, name: str):
        entry = REGISTRY.get(name)
        if entry is None:
            return None
        return entry.shown_as if self.field == "label" else getattr(entry.display, self.field)

    def get(self, name: str, default=None):
        value = self._of(name)
        return value if value is not None else (name if default is None and self.field == "label" else default)

    def __getitem__(self, name: str):
        value = self._of(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: str) -> bool:
        return self._of(name) is not None


SCORE_LABELS = _FromRegistry("label")
SCORE_COLOURS = _FromRegistry("colour")
SCORE_STYLES = _FromRegistry("line")
# Scores of selcal.scores.REGISTRY without a colour of their own take these colours in registry order.
EXTRA_SCORE_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728")


def score_colour(name: str) -> str:
    if name in SCORE_COLOURS:
        return SCORE_COLOURS[name]
    extra = [n for n in REGISTRY if n not in SCORE_COLOURS]
    index = extra.index(name) if name in extra else len(extra)
    return EXTRA_SCORE_COLOURS[index % len(EXTRA_SCORE_COLOURS)]


def score_style(name: str):
    """The entry's line style (temp: dashed); dash-dotted for a registry score past the sixth extra colour."""
    if name in SCORE_STYLES:
        return SCORE_STYLES[name]
    extra = [n for n in REGISTRY if n not in SCORE_COLOURS]
    return "-." if name not in SCORE_COLOURS and name in extra and extra.index(name) >= 6 else "-"


def all_scores(models, every: bool) -> list[str]:
    """Scores with a curve, in the order of the models' curves (registry order): those of any
    model (``every`` False) or of every model."""
    names = list(dict.fromkeys(s for m in models for s in m.curves))
    return [s for s in names if (all if every else any)(s in m.curves for m in models)]
CORRECT_COLOUR, ERROR_COLOUR = "#1f77b4", "#d62728"

STYLE = {
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "savefig.dpi": 150,
    "svg.hashsalt": "selcal",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "text.usetex": False,  # a user's matplotlibrc must not send model names through TeX
}
# Fonts that cover scripts DejaVu Sans lacks, used (in this order) when installed: matplotlib
# falls back glyph by glyph through font.family. Characters no installed font has are drawn as
# REPLACEMENT_CHARACTER (see user_text), so a file name in any script never warns.
FALLBACK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK KR",
                  "Source Han Sans", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback",
                  "Noto Sans", "Arial Unicode MS", "Microsoft YaHei", "PingFang SC", "Hiragino Sans")
REPLACEMENT_CHARACTER = "\ufffd"


def mpl():
    """matplotlib's Figure and the Agg canvas, imported on first use (never pyplot). The 3D axes selcal
    never draws are not warned about when they cannot be imported (under a memory limit they could not:
    a UserWarning of two lines on stderr before the out-of-memory line)."""
    import warnings

    import matplotlib

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unable to import Axes3D")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

    return matplotlib, Figure, FigureCanvasAgg


@functools.lru_cache(maxsize=1)
def fonts() -> tuple[tuple[str, ...], frozenset[int]]:
    """The font.family chain (DejaVu Sans, then the installed FALLBACK_FONTS) and the code
    points it covers. Only installed families are named, so font_manager never logs a miss."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    families = ("DejaVu Sans",) + tuple(f for f in FALLBACK_FONTS if f in installed)
    covered: set[int] = set()
    for family in families:
        try:
            path = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
            covered.update(FT2Font(path).get_charmap())
        except (ValueError, OSError, RuntimeError):  # listed but unreadable: its glyphs count as missing
            continue
    return families, frozenset(covered)


def style() -> dict[str, Any]:
    """:data:`STYLE` with the font chain of this machine."""
    return {**STYLE, "font.family": list(fonts()[0])}


def user_text(text, limit: int | None = None, *, escape: bool = True) -> str:
    r"""``text`` from the user (a model or file name, an id, a group value) as matplotlib draws it literally.

    matplotlib treats a string with an even number of unescaped ``$`` as mathtext, where
    ``_``, ``^`` and ``\`` are markup and a malformed formula raises while the figure is
    saved. Every ``$`` is escaped here (matplotlib draws ``\$`` as ``$``), so user text is
    never parsed, whatever else the label holds; labels that carry user text therefore hold
    no mathtext of selcal's own. Characters that no font of the chain (:data:`FALLBACK_FONTS`)
    can draw become :data:`REPLACEMENT_CHARACTER` instead of a missing-glyph warning.
    With ``limit``, a longer text is cut in its middle to ``limit`` characters ("head…tail"),
    so that a long name cannot squeeze the axes out of a figure (``NAME_LIMITS``).
    ``escape=False`` for a text artist made with ``parse_math=False`` (which would draw the
    escaping backslash): glyphs and length are handled the same.
    Every drawing function of this module (and any figure added to it) passes model names,
    group values and file names through this function.

    Examples
    --------
    >>> user_text("a$b_c^d\\e")
    'a\\$b_c^d\\e'
    >>> user_text("\u6a21\u578b_\u03b2") == ("\u6a21\u578b" if 0x6a21 in fonts()[1] else "\ufffd\ufffd") + "_\u03b2"
    True
    >>> user_text(3)
    '3'
    >>> user_text("resnet50_imagenet_seed0_final", limit=12)
    'resne…_final'
    """
    from ..escape import printable  # control characters and non-UTF-8 bytes as escapes, as in every output

    text = printable(text, keep="\n")
    covered = fonts()[1]
    if covered:
        text = "".join(c if ord(c) in covered or c == "\n" else REPLACEMENT_CHARACTER for c in text)
    if limit is not None and len(text) > limit:
        head = (limit - 1) // 2
        text = text[:head] + "…" + text[len(text) - (limit - 1 - head):]
    return text.replace("$", "\\$") if escape else text


def new_figure(width: float, height: float):
    """A figure on the Agg canvas, at the resolution it is saved at: the layout then measures
    text with the renderer that draws it, and matplotlib's cache of text extents serves both."""
    _, Figure, FigureCanvasAgg = mpl()
    figure = Figure(figsize=(width, height), dpi=STYLE["savefig.dpi"], layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def one_model(model):
    """The :class:`~selcal.results.ModelResult` a figure of one model draws: ``model`` itself, or the
    one model of an :class:`~selcal.results.EvaluationResult`."""
    from ..errors import SelcalError

    models = getattr(model, "__dict__", {}).get("models")
    if models is None:
        return model
    if len(models) != 1:
        names = ", ".join(repr(m.name) for m in models[:5])
        raise SelcalError(f"the result holds {len(models)} models ({names}); pass one: result.models[i] or "
                          "result['name']")
    return models[0]


def on_axes(ax, draw, size: tuple[float, float]):
    """``draw(axes)`` on the caller's ``ax`` (returned; its figure and matplotlib's settings are left
    as they are), or on the axes of a new Figure of ``size`` inches in selcal's style (returned).
    No figure is registered with pyplot, and no global setting outlives the call."""
    if ax is not None:
        draw(ax)
        return ax
    matplotlib, _, _ = mpl()
    with matplotlib.rc_context(style()):
        figure = new_figure(*size)
        draw(figure.add_subplot())
    return figure


def on_two_axes(ax, below_ax, draw, size: tuple[float, float], ratios: tuple[float, float]):
    """:func:`on_axes` for a figure of a main panel and one below it that shares its x axis:
    ``draw(ax, below_ax)`` on the caller's axes (``ax`` returned), or on the two panels of a new
    Figure of ``size`` inches whose heights are in ``ratios`` (returned)."""
    if ax is not None:
        draw(ax, below_ax)
        return ax
    matplotlib, _, _ = mpl()
    with matplotlib.rc_context(style()):
        figure = new_figure(*size)
        grid = figure.add_gridspec(2, 1, height_ratios=list(ratios))
        top = figure.add_subplot(grid[0])
        draw(top, figure.add_subplot(grid[1], sharex=top))
    return figure


def pct(value) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{100 * value:.2f}%"


def score_detail(name: str, model) -> str:
    """What was fitted for a score (its registry entry's ``legend``): ' (p = 2)', ' (T = 2.28)' or ''."""
    entry = REGISTRY.get(name)
    legend = None if entry is None else entry.display.legend
    return legend(model.scores.get(name, {})) if legend is not None else ""


def score_label(name: str, model=None, limit: int | None = None, *, escape: bool = True) -> str:
    r"""A score's name as a figure draws it: its registry entry's label, or for a column of the file
    (``--score-col``) its name, passed through :func:`user_text` (``limit``, ``escape`` as there):
    a column named ``conf$x$`` is drawn as written, never as mathtext. With ``model``, what was
    fitted follows (:func:`score_detail`, selcal's own text: never cut).

    >>> score_label("conf$x$"), score_label("msp")
    ('conf\\$x\\$', 'MSP')
    """
    return user_text(SCORE_LABELS.get(name, name), limit, escape=escape) + \
        ("" if model is None else score_detail(name, model))


def model_colours(count: int) -> list:
    matplotlib, _, _ = mpl()
    if count <= 10:
        cmap = matplotlib.colormaps["tab10"]
        return [cmap(i) for i in range(count)]
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(i / max(count - 1, 1)) for i in range(count)]


def legend_below(ax, ncol: int = 1, handles=None):
    """The axes' legend under the x label. Pass ``handles`` when a label carries user text:
    matplotlib's automatic collection drops labels that start with "_", as a model name may."""
    args = () if handles is None else (handles, [h.get_label() for h in handles])
    ax.legend(*args, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol, handlelength=1.8,
              borderaxespad=0.0)


@dataclass
class RenderedFigure:
    """One figure as file content: ``stem`` (file name without extension), ``kind``,
    the model it shows (``None`` for figures across models), a caption, the bytes, and
    ``models``, the names of the models it draws; ``board``: the label of its board, a figure across
    the models of one board of several, else ""."""

    stem: str
    kind: str
    model: str | None
    caption: str
    format: str
    data: bytes
    path: Path | None = None
    models: tuple[str, ...] = ()
    board: str = ""


# Nothing may be drawn closer than this to the border of a figure, in pixels at savefig.dpi.
BORDER_PX = 4


def fit(figure) -> None:
    """Lay ``figure`` out once and freeze the layout, with nothing drawn past its border.

    The constrained layout places axes, titles and figure legends, but not what hangs outside
    an axes (a legend anchored below it) or a title longer than the figure; these are measured
    here and, if any reaches past the border, the figure grows by that much on that side and is
    laid out again (at most four times). Freezing the layout then saves ``savefig`` from
    solving it twice (it draws once to lay out, then again to paint, which lays out again):
    that was most of the time of most figures.
    """
    engine = figure.get_layout_engine()
    if engine is None:
        return
    renderer = figure.canvas.get_renderer()
    pad = BORDER_PX / STYLE["savefig.dpi"] + 1 / figure.dpi
    for _ in range(4):
        engine.execute(figure)
        box = figure.get_tightbbox(renderer)  # inches
        width, height = figure.get_size_inches()
        left, right = max(0.0, pad - box.x0), max(0.0, box.x1 - (width - pad))
        bottom, top = max(0.0, pad - box.y0), max(0.0, box.y1 - (height - pad))
        if left + right + bottom + top == 0.0:
            break
        figure.set_size_inches(width + 1.5 * (left + right), height + 1.5 * (bottom + top))
    figure.set_layout_engine(None)


# PNG figures are 256-colour palette images: a third of the bytes of the RGBA files matplotlib
# writes, with no visible change (the palette by Pillow's maximum-coverage quantizer, without
# dithering: the white background stays exact, and the largest change of a channel was 13 of 255
# on the figures of bench/bench_report.py; tests/figures/test_figure_data.py allows 16).
PNG_COLOURS = 256


def render(figure, fmt: str) -> bytes:
    """The file bytes of ``figure`` (no date or software in them), laid out by :func:`fit`; the
    figure is released. PNG: a palette image of PNG_COLOURS colours (:func:`palette_png`)."""
    buffer = _io.BytesIO()
    fit(figure)
    if fmt == "png":
        # the pixels savefig would encode as PNG (its facecolour, the figure's size and dpi), unencoded
        figure.savefig(buffer, format="rgba", dpi=figure.dpi)
        size, dpi = figure.canvas.get_width_height(physical=True), figure.dpi
        if len(buffer.getvalue()) != 4 * size[0] * size[1]:  # cropped (an rc savefig.bbox): decode its PNG
            from PIL import Image

            buffer = _io.BytesIO()
            figure.savefig(buffer, format="png", dpi=dpi)
            with Image.open(buffer) as image:
                size, buffer = image.size, _io.BytesIO(image.convert("RGBA").tobytes())
        figure.clear()
        return palette_png(buffer.getvalue(), size, dpi)
    metadata = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    figure.savefig(buffer, format=fmt, metadata=metadata)
    figure.clear()
    return buffer.getvalue()


def palette_png(rgba: bytes, size: tuple[int, int], dpi: float) -> bytes:
    """A PNG of PNG_COLOURS palette colours (no date or software in it) from raw RGBA pixels of ``size``
    (width, height), opaque as matplotlib's figures are (the alpha channel is dropped); ``dpi`` is
    written in it, as matplotlib does."""
    from PIL import Image

    image = Image.frombytes("RGBA", size, rgba).convert("RGB")
    palette = image.quantize(PNG_COLOURS, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
    out = _io.BytesIO()
    palette.save(out, format="PNG", dpi=(dpi, dpi))
    return out.getvalue()


def safe_stem(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return stem[:120]




def wrap(text: str, width: float, fontsize: float = 10.5) -> str:
    r"""``text`` broken into lines that fit ``width`` inches at ``fontsize`` points, so that a
    title never runs past the figure's border (matplotlib does not wrap a title itself).

    Lines are measured in a conservative average glyph width (0.62 em; a wide East Asian
    character counts twice) and broken at spaces, or inside a word longer than a line; an
    escaped ``\$`` is never split. Existing line breaks are kept.

    Examples
    --------
    >>> wrap("risk-coverage of a model with a rather long name", 2.0, 10.0)
    'risk-coverage of a\nmodel with a rather\nlong name'
    >>> wrap("a\\$b", 0.1)
    'a\\$b'
    """
    import unicodedata

    wide = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    per_line = max(8, int(width * 72 / (0.62 * fontsize) * (1 - 0.5 * wide / max(len(text), 1))))
    text = text.replace("\\$", "\0")
    lines = [textwrap.fill(line, per_line, break_long_words=True, break_on_hyphens=False) or line
             for line in text.split("\n")]
    return "\n".join(lines).replace("\0", "\\$")


def figure_width(figure) -> float:
    """Width of ``figure`` in inches."""
    return float(figure.get_size_inches()[0])


def legend_columns(labels, width: float, most: int = 6, fontsize: float = 8.5) -> int:
    """How many columns a legend of ``labels`` can have in ``width`` inches (at least one, at
    most ``most``): its longest line, in the conservative glyph width of :func:`wrap`, plus
    the handle decides the width of a column.

    >>> legend_columns(["a", "b", "c"], 6.0), legend_columns(["x" * 60] * 4, 6.0)
    (3, 1)
    """
    labels = [str(label) for label in labels]
    if not labels:
        return 1
    longest = max(len(line) for label in labels for line in label.split("\n"))
    column = 0.62 * fontsize / 72 * longest + 0.55
    return max(1, min(most, len(labels), int(width // column)))


_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def plain_log_axis(axis, plain_below: float = 1e5) -> None:
    """Decades of a log ``axis`` written as plain text (1, 10, 1,000, then 10⁶), no minor ticks:
    matplotlib's default writes every tick as a formula, which is most of a log axis's cost."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    def decade(value, _position) -> str:
        if value <= 0:
            return ""
        exponent = round(math.log10(value))
        if 1 <= value < plain_below:
            return f"{value:,.0f}"
        return "10" + str(exponent).translate(_SUPERSCRIPTS)

    axis.set_major_locator(LogLocator(base=10.0, numticks=12))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(decade))
