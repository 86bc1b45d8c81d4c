"""What matplotlib draws of a figure's texts, for the tests of user text in figures (shared by
tests/test_figure_edges.py and tests/test_polish_session3.py)."""

from __future__ import annotations


def drawn_texts(figure) -> list[tuple[str, str, bool | str]]:
    """(the string as set, what matplotlib draws, whether it is parsed as mathtext) of every text."""
    from matplotlib.text import Text

    out = []
    for text in figure.findobj(Text):
        raw = text.get_text()
        if raw:
            shown, math_mode = text._preprocess_math(raw)
            out.append((raw, shown, math_mode))
    return out
