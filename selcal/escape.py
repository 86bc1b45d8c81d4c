r"""Text from the user (file, model, column and group names, ids, warnings) made safe for the medium it
is written to: one rule per medium, and every renderer calls these.

* :func:`printable`: one line of plain text (the terminal, error lines, every other medium first;
  :func:`terminal` for text that a rich console reads as markup):
  a control character, a line or paragraph separator, a bidirectional override, or a byte of a
  file name that is not UTF-8 becomes a visible escape (``\x1b``, ``\n``, ``\u202e``, ``\xff``).
* :func:`csv_cell`: a text cell a spreadsheet would run as a formula (it starts with ``=``, ``+``,
  ``-``, ``@``, a tab or a carriage return: OWASP's rule) is prefixed with ``'``; a number stays
  a number.
* :func:`markdown_text` and :func:`code_span`: text inside Markdown (a table cell, a list item)
  and inside a code span: no raw HTML, no table break, no emphasis, no escape from the span.
* :func:`xml_text`: only characters that XML 1.0 allows (escaped as :func:`printable` does);
  the markup characters themselves are escaped by :mod:`xml.etree.ElementTree`.
* :func:`html_text` and :func:`html_name`: text inside HTML (an element or a quoted attribute),
  and a name there that may break over lines at its natural points first.
* :func:`latex_text`: text inside a LaTeX table (a cell, a header): the ten special characters
  ``_ % & # $ { } ~ ^ \`` as their commands, not-printable characters as escapes.

References
----------
OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection.
CommonMark 0.31, "Backslash escapes" and "Code spans", https://spec.commonmark.org/0.31.2/.
W3C, Extensible Markup Language (XML) 1.0, production [2] ``Char``.
WHATWG HTML Living Standard, "The wbr element".
"""

from __future__ import annotations

import re

__all__ = ["printable", "terminal", "csv_cell", "markdown_text", "code_span", "xml_text", "html_text", "html_name",
           "latex_text"]


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8 (Python's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return ch.encode("unicode_escape", "backslashreplace").decode("ascii")


def printable(text, keep: str = "") -> str:
    r"""``text`` with every character that is not printable written as an escape, so that it stays
    on one line and can neither move the cursor, recolour a terminal nor reorder what follows
    (characters of ``keep``, e.g. ``"\n"``, are left as they are).

    >>> printable("ok\x1b[2J\nnext")
    'ok\\x1b[2J\\nnext'
    >>> printable("evil\u202etxt.exe"), printable("caf\udce9")
    ('evil\\u202etxt.exe', 'caf\\xe9')
    >>> printable("a\nb", keep="\n")
    'a\nb'
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _escape_char(ch) for ch in text)


def terminal(text, keep: str = "") -> str:
    r"""User text for a rich console that reads markup (a table cell or header, a title): as
    :func:`printable`, and a ``[`` that would open a rich markup tag escaped.

    >>> terminal("[red]x\x1b[0m")
    '\\[red]x\\x1b[0m'
    """
    from rich.markup import escape

    return escape(printable(text, keep))


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A CSV cell that no spreadsheet runs: text starting with ``=``, ``+``, ``-``, ``@``, a tab or
    a carriage return gets a leading ``'`` (shown, not evaluated); anything else, and numbers
    (also negative ones, as numbers or as text), is returned unchanged. Not-printable characters
    are escaped (:func:`printable`).

    >>> csv_cell("=HYPERLINK(\\"http://x\\")"), csv_cell("@SUM(A1)"), csv_cell("-0.5"), csv_cell(-0.5)
    ('\\'=HYPERLINK("http://x")', "'@SUM(A1)", '-0.5', -0.5)
    """
    if not isinstance(value, str):
        return value
    if value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        value = "'" + value
    return printable(value)


_MARKDOWN_SPECIAL = set("\\`*_[]<>|#&~$")


def markdown_text(text) -> str:
    r"""User text inside Markdown (a table cell, a list item, a heading): every character that
    Markdown or GitHub's renderer reads as markup (HTML tags and entities, emphasis, links, code,
    table pipes, math) is backslash-escaped, and not-printable characters, a newline included,
    become escapes (:func:`printable`), so the text stays in its cell.

    >>> markdown_text("<img src=x onerror=alert(1)>|a`b")
    '\\<img src=x onerror=alert(1)\\>\\|a\\`b'
    >>> markdown_text("two\nlines")
    'two\\\\nlines'
    """
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in printable(text))


def code_span(text) -> str:
    r"""``text`` as one Markdown code span: fenced by more backticks than it holds in a row (and
    padded when it starts or ends with one), so it cannot end the span early (for a list item or
    a paragraph: in a table cell a pipe would still end the cell).

    >>> code_span("a`b"), code_span("plain")
    ('``a`b``', '`plain`')
    """
    text = printable(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text, keep: str = "\n") -> str:
    r"""``text`` holding only characters that XML 1.0 allows: the others (control characters,
    lone surrogates of a non-UTF-8 file name, U+FFFE and U+FFFF) become escapes as in
    :func:`printable`; the other not-printable characters are escaped too, except those of
    ``keep`` (a newline of a multi-line message).

    >>> xml_text("a\x00b\x1bc\udcff")
    'a\\x00b\\x1bc\\xff'
    """
    text = printable(text, keep=keep)
    return _NOT_XML.sub(lambda m: _escape_char(m.group()), text)


def html_text(text) -> str:
    r"""User text inside HTML, an element's text or a quoted attribute: ``& < > " '`` as character
    references, not-printable characters as escapes (:func:`printable`; a newline is kept).

    >>> html_text("<b onclick='x'>&\x1b")
    '&lt;b onclick=&#x27;x&#x27;&gt;&amp;\\x1b'
    """
    import html

    return html.escape(printable(text, keep="\n"), quote=True)


_NATURAL_BREAK = re.compile(r"([/_.\-])")  # after these a long name may break first


def html_name(text) -> str:
    r"""A name (a model, a path) as HTML text (:func:`html_text`) with a ``<wbr>`` after every ``/``,
    ``_``, ``-`` and ``.``: a browser breaks a long name there first, and inside a part only when
    the part alone is wider than its box (with CSS ``overflow-wrap: anywhere``). The ``<wbr>`` are
    inserted after escaping (no character reference holds one of these four characters), so the
    name's own ``<wbr>`` stays text. Not for an attribute.

    >>> html_name("runs/resnet50_ls-0.1<wbr>")
    'runs/<wbr>resnet50_<wbr>ls-<wbr>0.<wbr>1&lt;wbr&gt;'
    >>> html_name("a_")
    'a_'
    """
    escaped = html_text(text)
    return _NATURAL_BREAK.sub(r"\1<wbr>", escaped[:-1]) + escaped[-1:]


_LATEX = {"\\": r"\textbackslash{}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$",
          "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_text(text) -> str:
    r"""User text inside LaTeX (a table cell, a header): each special character as the command that
    prints it, so a name can neither break the table nor run a command; not-printable characters
    become escapes (:func:`printable`), whose backslash is then printed too.

    >>> print(latex_text("ls_0.1 & 5% #1 $x$ {a} ~^\\"))
    ls\_0.1 \& 5\% \#1 \$x\$ \{a\} \textasciitilde{}\textasciicircum{}\textbackslash{}
    """
    return "".join(_LATEX.get(ch, ch) for ch in printable(text))
