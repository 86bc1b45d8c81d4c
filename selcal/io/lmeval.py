"""lm-evaluation-harness sample logs (``lm_eval ... --log_samples``) of multiple-choice tasks.

The harness writes, per task, ``<output_path>/<model_name_sanitized>/samples_<task>_<date>.jsonl``
(``lm_eval/loggers/evaluation_tracker.py``, ``save_results_samples``; ``<date>`` is
``datetime.now().isoformat()`` with ``:`` replaced by ``-``), one JSON object per question
(``lm_eval/evaluator.py``, ``evaluate``): ``doc_id``, ``doc``, ``target`` (``str`` of the gold
choice's index, or the gold choice's text), ``arguments`` (``{"gen_args_i": {"arg_0": context,
"arg_1": target_delimiter + choice_i}}``), ``resps`` and ``filtered_resps`` (per choice
``[log-likelihood, is_greedy]``, both written as strings), ``filter`` and the metrics (``acc``,
``acc_norm``, ...). For a multiple-choice task the log-likelihoods of the choices are the
logits, the target is the label and ``doc_id`` the id; the model is named
``<model folder>/<task>``.

Length normalisation (``lm_norm``): ``chars`` divides each log-likelihood by the length of its
choice in characters, as the harness's ``acc_norm`` does (``lm_eval/api/task.py``,
``process_results``), ``bytes`` by its UTF-8 length (``acc_bytes``). The choice is the
continuation without the task's target delimiter, taken to be the harness's default ``" "``
when every continuation of the question starts with a space. With ``acc_mutual_info`` the
harness logs K more unconditional requests (an empty context) per question: only the first K,
the conditional ones, are read. Questions with different numbers of choices are read one
count at a time (``lm_choices``); :func:`choice_counts` says which counts a log holds.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import numpy as np

from .arrays import ArraysSource
from ..options import LM_NORMS as NORMS  # the values of --lm-norm
from ..errors import said
from .base import Line, input_error, first_line

if TYPE_CHECKING:
    import polars as pl  # imported where a log is read (see selcal.io.text)

METADATA_KEY = "selcal.lm_eval"  # a dump's metadata key saying it is a log's (its log-likelihoods' scale means nothing)
LOG_NAME = re.compile(r"^samples_(.+)_(\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")


def is_log(path: str) -> bool:
    """A file named as the harness names sample logs: ``samples_<task>_<date>.jsonl``."""
    return bool(LOG_NAME.match(os.path.basename(path))) and os.path.isfile(path)


def find_logs(folder: str) -> list[str]:
    """The sample logs anywhere under ``folder``, sorted by path."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(root, f) for f in files if LOG_NAME.match(f)]
    return sorted(found)


def model_name(path: str) -> str:
    """``<model folder>/<task>``: the folder the harness names after the model, and the task.

    >>> model_name("out/EleutherAI__pythia-160m/samples_mmlu_anatomy_2024-05-13T14-03-22.123456.jsonl")
    'EleutherAI__pythia-160m/mmlu_anatomy'
    """
    task = LOG_NAME.match(os.path.basename(path)).group(1)
    folder = os.path.basename(os.path.dirname(path))
    return f"{folder}/{task}" if folder not in ("", ".") else task


def _read(path: str) -> pl.DataFrame:
    import polars as pl

    schema = {"doc_id": pl.Int64, "target": pl.String, "filter": pl.String,
              "filtered_resps": pl.List(pl.List(pl.String))}
    try:
        return pl.read_ndjson(path, schema=schema)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise _bad_line(path, exc) from None


def _arguments(path: str, n_args: int) -> list:
    """Per question, its requests as ``{"gen_args_i": {"arg_0": context, "arg_1": continuation}}``
    (what the harness writes); older harness versions wrote a list of ``[context, continuation]``."""
    import polars as pl

    argument = pl.Struct({"arg_0": pl.String, "arg_1": pl.String})
    for dtype in (pl.Struct({f"gen_args_{i}": argument for i in range(n_args)}), pl.List(pl.List(pl.String))):
        try:
            column = pl.read_ndjson(path, schema={"arguments": dtype})["arguments"].to_list()
        except (pl.exceptions.PolarsError, OSError, ValueError):
            continue
        if dtype == pl.List(pl.List(pl.String)):
            column = [None if row is None else {f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(arg or [])}
                                                for i, arg in enumerate(row)} for row in column]
        return column
    return []


def _bad_line(path: str, exc: BaseException):
    """The first line that is not a JSON object, or the reader's message."""
    import json

    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle):
            try:
                value = json.loads(line)
            except ValueError as error:
                return input_error(path, None, Line(number, 1), f"is not valid JSON ({error.msg}); is the log complete?")
            if not isinstance(value, dict):
                return input_error(path, None, Line(number, 1), "is not a JSON object; is this an lm-evaluation-harness "
                             "sample log?")
    return input_error(path, None, None, f"not a readable lm-evaluation-harness sample log ({first_line(exc)})")


def choice_counts(path: str) -> list[int]:
    """The numbers of choices of the log's questions (conditional requests only), sorted."""
    n_resps = _read(path)["filtered_resps"].list.len().fill_null(0).to_numpy()
    if n_resps.size == 0:
        return []
    return sorted(set(LmEvalSource._conditional_counts(_arguments(path, int(n_resps.max())) or [None] * n_resps.size,
                                                        n_resps).tolist()))


class LmEvalSource(ArraysSource):
    """One task's sample log: a row per question, the choices' log-likelihoods as logits."""

    def __init__(self, path: str, label_col: str | None, ignore_label: int | None, group_col: str | None = None,
                 logits_col: str | None = None, *, lm_norm: str | None = None, lm_choices: int | None = None):
        for option, value in ((said("label_col"), label_col), (said("logits_col"), logits_col),
                              (said("group_col"), group_col)):
            if value is not None:
                raise input_error(path, None, None, f"{option} is not available for an lm-evaluation-harness log (its "
                                              "columns are fixed: target, the choices' log-likelihoods, doc_id)")
        norm = lm_norm or "none"
        if norm not in NORMS:
            raise input_error(path, None, None, f"--lm-norm must be one of {', '.join(NORMS)}, got {norm!r}")
        frame = _read(path)
        if frame.height == 0:
            raise input_error(path, None, None, "has no rows")
        for name in ("doc_id", "target", "filtered_resps"):
            nulls = frame[name].is_null()
            if nulls.any():
                row = int(nulls.arg_true()[0])
                raise input_error(path, name, Line(row, 1), "is missing; is this the sample log of a multiple-choice task "
                            "(lm_eval --log_samples)?")
        filters = frame["filter"].drop_nulls().unique(maintain_order=True).to_list()
        if len(filters) > 1:
            raise input_error(path, "filter", None, f"holds the filters {', '.join(map(repr, filters))}; selcal reads "
                        "the log of one filter: keep the rows of one")
        n_resps = frame["filtered_resps"].list.len().to_numpy()
        args = _arguments(path, int(n_resps.max())) or [None] * frame.height
        n_choices = self._conditional_counts(args, n_resps)
        counts = sorted(set(n_choices.tolist()))
        if lm_choices is None and len(counts) > 1:
            first = int(np.flatnonzero(n_choices != n_choices[0])[0])
            raise input_error(path, "filtered_resps", Line(first, 1),
                        f"has {n_choices[first]} choices, line 1 {n_choices[0]} (the log holds questions of "
                        f"{', '.join(map(str, counts))} choices); selcal evaluate reads one model per choice count; "
                        "pass --lm-choices K (lm_choices=K in Python) to read the questions of K choices")
        keep = np.ones(frame.height, dtype=bool) if lm_choices is None else n_choices == lm_choices
        if not keep.any():
            raise input_error(path, None, None, f"has no question of {lm_choices} choices (it has {', '.join(map(str, counts))})")
        rows = np.flatnonzero(keep)
        self._lines = rows  # line (from 0) of every kept question
        k = int(n_choices[rows[0]])
        logits = np.empty((rows.size, k), dtype=np.float64)
        resps = frame["filtered_resps"].to_list()
        for i, row in enumerate(rows):
            for j in range(k):
                pair = resps[row][j]
                try:
                    logits[i, j] = float(pair[0])
                except (TypeError, ValueError, IndexError):
                    raise input_error(path, "filtered_resps", Line(int(row), 1),
                                f"choice {j} holds {pair!r}, not [log-likelihood, is_greedy]; is this the log of a "
                                "multiple-choice task?") from None
        choices = self._choices(args, rows, k)
        if norm != "none":
            lengths = np.array([[len(c) if norm == "chars" else len(c.encode("utf-8")) for c in row] for row in choices],
                               dtype=np.float64)
            if (lengths == 0).any():
                i, j = np.argwhere(lengths == 0)[0]
                raise input_error(path, "arguments", Line(int(rows[i]), 1), f"choice {j} is empty; --lm-norm {norm} "
                            "divides by its length")
            logits /= lengths
        labels = self._labels(path, frame["target"].to_list(), rows, choices)
        self.norm = norm
        super().__init__(path, {"logits": logits, "label": labels,
                                "id": frame["doc_id"].to_numpy()[rows]}, None, ignore_label)
        self.metadata = {METADATA_KEY: f"{model_name(path)}; {k} choices; norm {norm}"}

    @staticmethod
    def _conditional_counts(args: list, n_resps: np.ndarray) -> np.ndarray:
        """Choices per question: half the requests when the second half is unconditional (an
        empty context: the harness's ``acc_mutual_info``)."""
        counts = n_resps.copy()
        for row, (n, arguments) in enumerate(zip(n_resps, args)):
            if n % 2 == 0 and arguments:
                half = [arguments.get(f"gen_args_{i}") or {} for i in range(n // 2, n)]
                if half and all(a.get("arg_0") == "" for a in half):
                    counts[row] = n // 2
        return counts

    @staticmethod
    def _choices(args: list, rows: np.ndarray, k: int) -> list[list[str]]:
        """Each kept question's choices: its continuations without the default delimiter ``" "``."""
        out = []
        for row in rows:
            arguments = args[row] or {}
            continuations = [(arguments.get(f"gen_args_{j}") or {}).get("arg_1") or "" for j in range(k)]
            if all(c.startswith(" ") for c in continuations):
                continuations = [c[1:] for c in continuations]
            out.append(continuations)
        return out

    @staticmethod
    def _labels(path: str, targets: list, rows: np.ndarray, choices: list[list[str]]) -> np.ndarray:
        """The gold choice's index: the target as written (``"3"``), or the choice whose text it is."""
        labels = np.empty(rows.size, dtype=np.int64)
        for i, row in enumerate(rows):
            target = targets[row].strip()
            if re.fullmatch(r"-?\d+", target):
                labels[i] = int(target)
            elif target in choices[i]:
                labels[i] = choices[i].index(target)
            elif target.startswith("["):
                raise input_error(path, "target", Line(int(row), 1), f"holds several gold answers ({target}); selcal needs "
                            "one gold choice per question")
            else:
                raise input_error(path, "target", Line(int(row), 1), f"holds {target!r}, neither a choice's index nor one of "
                            f"its choices ({', '.join(map(repr, choices[i]))})")
        return labels

    def raw_batches(self, batch_rows: int, ids: bool = True):
        if self.num_rows:  # one question per line: messages name the log's line
            yield self._columns, _KeptLines(self._lines)


class _KeptLines(Line):
    """Row 0 of the kept questions; ``+ r`` is the line of kept question r (some lines may be
    another choice count's)."""

    def __new__(cls, lines: np.ndarray):
        line = super().__new__(cls, 0, 1)
        line.lines = lines
        return line

    def __add__(self, other):
        return Line(int(self.lines[int(other)]), 1)

    __radd__ = __add__
