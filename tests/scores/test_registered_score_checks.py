"""A score registered from outside is checked where its output enters selcal (CONVENTIONS.md,
"Scores registered from outside"): a wrong shape, dtype, a non-finite value, probabilities that are
no probabilities, a state the JSON cannot hold or an exception is one line naming the score (exit 2
on the command line), never a traceback nor a number computed from it. Numpy values in a state are
converted. A plug-in that fails to load, or takes a name already registered, is one warning and
every command still works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import selcal
from selcal.errors import SelcalError
from selcal.scores import REGISTRY
from selcal.scores.validate import SUM_TOLERANCE

N, K = 60, 3


def data(seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, N)
    logits = rng.normal(0.0, 2.0, (N, K))
    logits[np.arange(N), labels] += 1.0
    return logits, labels


@pytest.fixture
def registered():
    """register(name, **functions) -> the entry; every score registered here is removed after the test."""
    names = []

    def register(name="outside", **functions):
        functions.setdefault("score", lambda v, s: v.max(axis=1))
        names.append(name)
        return selcal.register_score(name, **functions)

    yield register
    for name in names:
        REGISTRY.pop(name, None)


def evaluate(name="outside"):
    logits, labels = data()
    val_logits, val_labels = data(1)
    return selcal.evaluate_arrays(logits, labels, val_logits, val_labels, scores=f"msp,{name}")


def one_line_naming(exc_info, name="outside"):
    text = str(exc_info.value)
    assert "\n" not in text and f"score {name!r}" in text, text
    return text


# --------------------------------------------------------------------------- wrong values, by hypothesis
def _wrong_values(kind: str, n: int, k: int, where: int):
    """A wrong output of a score function for a chunk of n rows of k classes."""
    if kind == "short":
        return np.zeros(n - 1)
    if kind == "long":
        return np.zeros(n + 1)
    if kind == "matrix":
        return np.zeros((n, k))
    if kind == "column":
        return np.zeros((n, 1))
    if kind == "scalar":
        return 0.5
    if kind == "none":
        return None
    if kind == "strings":
        return np.array(["a"] * n)
    if kind == "complex":
        return np.zeros(n, dtype=complex)
    if kind == "objects":
        return np.array([object()] * n, dtype=object)
    values = np.linspace(0.0, 1.0, n)
    values[where % n] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind]
    return values


WRONG = ["short", "long", "matrix", "column", "scalar", "none", "strings", "complex", "objects", "nan", "inf", "-inf"]


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(WRONG), where=st.integers(0, 10**6), fitted=st.booleans())
def test_a_score_returning_a_wrong_array_is_one_line_naming_it(registered, kind, where, fitted):
    REGISTRY.pop("outside", None)
    registered(score=lambda v, s: _wrong_values(kind, v.shape[0], v.shape[1], where),
               fit=(lambda v, y, o: {"a": 1.0}) if fitted else None)
    with pytest.raises(SelcalError) as exc_info:
        evaluate()
    text = one_line_naming(exc_info)
    assert "score function returned" in text


def _wrong_probabilities(kind: str, v: np.ndarray, where: int):
    n, k = v.shape
    p = np.exp(v - v.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    row, col = where % n, (where // n) % k
    if kind == "exp":  # the example: exp(logits), rows summing to anything
        return np.exp(v)
    if kind == "transposed":
        return p.T
    if kind == "one_column_short":
        return p[:, :-1]
    if kind == "negative":
        p[row, col] = -0.25
        return p
    if kind == "above_one":
        p[row] = 0.0
        p[row, col] = 1.5
        return p
    if kind == "off_sum":
        p[row] *= 1.0 + 100 * SUM_TOLERANCE
        return p
    if kind == "nan":
        p[row, col] = np.nan
        return p
    if kind == "vector":
        return p.max(axis=1)
    raise AssertionError(kind)


@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["exp", "transposed", "one_column_short", "negative", "above_one", "off_sum", "nan",
                             "vector"]), where=st.integers(0, 10**6))
def test_probabilities_that_are_no_probabilities_are_refused(registered, kind, where):
    REGISTRY.pop("outside", None)
    registered(probabilities=lambda v, s: _wrong_probabilities(kind, v, where))
    with pytest.raises(SelcalError) as exc_info:
        evaluate()
    assert "probabilities function returned" in one_line_naming(exc_info)


def test_probabilities_within_the_tolerance_are_accepted(registered):
    """A float32 softmax (rows off 1 by a few float32 units) is a probability, and the numbers are those
    of the probabilities as given."""
    def softmax32(v, s):
        z = (v - v.max(axis=1, keepdims=True)).astype(np.float32)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    registered(probabilities=softmax32, score=lambda v, s: softmax32(v, s).max(axis=1))
    result = evaluate()
    assert np.isfinite(result.scores["outside"]["ece"])


def test_a_sum_just_outside_the_tolerance_is_refused_and_just_inside_accepted(registered):
    def scaled(factor):
        def probabilities(v, s):
            p = np.exp(v - v.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            return p * factor
        return probabilities

    registered("inside", probabilities=scaled(1.0 + 0.5 * SUM_TOLERANCE))
    evaluate("inside")
    registered("outside", probabilities=scaled(1.0 - 2.0 * SUM_TOLERANCE))
    with pytest.raises(SelcalError) as exc_info:
        evaluate()
    assert "do not sum to 1" in one_line_naming(exc_info)


@pytest.mark.parametrize("role", ["score", "fit", "probabilities"])
def test_an_exception_of_the_score_is_one_line_naming_it(registered, role):
    def boom(*args):
        raise IndexError("index 7 is out of bounds\nfor axis 1")

    functions = {role: boom}
    if role == "probabilities":
        functions["score"] = lambda v, s: v.max(axis=1)
    registered(**functions)
    with pytest.raises(SelcalError) as exc_info:
        evaluate()
    text = one_line_naming(exc_info)
    assert f"its {role} function raised IndexError: index 7 is out of bounds for axis 1" in text
    assert "register_score in" in text  # where it was registered


# --------------------------------------------------------------------------- states
def test_numpy_values_in_a_state_are_converted_for_the_json(registered):
    def fit(v, y, o):
        return {"bias": np.zeros(K), "scale": np.float32(0.5), "count": np.int64(7), "nested": [np.arange(2)],
                "flag": np.bool_(True)}

    registered(fit=fit, score=lambda v, s: v.max(axis=1) * s["scale"] + s["bias"][0])  # the state as returned
    result = evaluate()
    state = json.loads(result.to_json())["models"][0]["scores"]["outside"]["state"]
    assert state == {"bias": [0.0, 0.0, 0.0], "scale": 0.5, "count": 7, "nested": [[0, 1]], "flag": True}


@pytest.mark.parametrize("state", [{"when": {1, 2}}, {"f": print}, object()])
def test_a_state_the_json_cannot_hold_is_refused_after_the_fit(registered, state):
    registered(fit=lambda v, y, o: state)
    with pytest.raises(SelcalError) as exc_info:
        evaluate()
    assert "its fit function returned a state the JSON cannot hold" in one_line_naming(exc_info)


@pytest.mark.parametrize("state, where, value", [
    ({"t": float("nan")}, "state['t']", "nan"),
    ({"w": np.array([[1.0, 2.0], [3.0, np.inf]])}, "state['w'][1][1]", "inf"),
    ([0.5, {"b": np.float32("-inf")}], "state[1]['b']", "-inf"),
    (np.float64("nan"), "state", "nan"),
    ({"ok": 1.0, "nested": [[1, 2], (3.0, float("nan"))]}, "state['nested'][1][1]", "nan"),
])
def test_a_state_holding_nan_or_inf_is_refused_naming_the_score_and_the_key(registered, state, where, value):
    """The JSON wrote NaN as null and the scores were computed from it; now one line naming where it is."""
    registered(fit=lambda v, y, o: state, score=lambda v, s: v.max(axis=1))
    with pytest.raises(SelcalError) as exc_info:
        evaluate()
    assert one_line_naming(exc_info).endswith(
        f"its fit function returned a state holding {value} at {where}; every number of a fitted state must be "
        "finite (a fit that did not converge?)")


def test_a_finite_state_with_text_and_integers_is_kept(registered):
    registered(fit=lambda v, y, o: {"name": "nan", "k": 3, "w": np.ones(2)}, score=lambda v, s: v.max(axis=1))
    assert "outside" in evaluate().scores


# --------------------------------------------------------------------------- the command line
def test_the_command_line_prints_one_line_and_exits_2(registered, tmp_path):
    registered(probabilities=lambda v, s: np.exp(v))
    logits, labels = data()
    path = tmp_path / "m.npz"
    np.savez(path, logits=logits, labels=labels)
    from typer.testing import CliRunner

    from selcal.cli import app

    out = CliRunner().invoke(app, ["evaluate", str(path), "--scores", "msp,outside"])
    assert out.exit_code == 2
    lines = [line for line in out.stderr.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("selcal: error: score 'outside'"), out.stderr
    assert "overflow" not in out.stderr


# --------------------------------------------------------------------------- registrations
def test_a_name_registered_twice_is_refused_naming_both(registered):
    registered("twice")
    with pytest.raises(ValueError, match=r"'twice' \(register_score in .*\) is refused: .*\(register_score in "):
        selcal.register_score("twice", score=lambda v, s: v.max(axis=1))
    with pytest.raises(ValueError, match=r"'msp' .*already registered \(built into selcal\)"):
        selcal.register_score("msp", score=lambda v, s: v.max(axis=1))


def _plugin(tmp_path, name: str, body: str, entry: str):
    package = tmp_path / "site"
    (package / name).mkdir(parents=True)
    (package / name / "__init__.py").write_text(textwrap.dedent(body))
    info = package / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[selcal.scores]\n{entry}\n")
    return package


def _selcal(args, *sites):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, sites), *sys.path]), "COLUMNS": "200"}
    code = f"import sys; sys.argv = ['selcal', *{list(args)!r}]; from selcal.cli import run; run()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_a_plugin_that_fails_or_clashes_is_one_warning_and_every_command_works(tmp_path):
    broken = _plugin(tmp_path / "a", "brokenscores", "import not_a_module_anywhere\n", "broken = brokenscores:go")
    clash = _plugin(tmp_path / "b", "clashscores", '''
        import selcal

        def register():
            selcal.register_score("fine_one", score=lambda v, s: v.max(axis=1))
            selcal.register_score("msp", score=lambda v, s: v.max(axis=1))
    ''', "clash = clashscores:register")
    good = _plugin(tmp_path / "c", "goodscores", '''
        import selcal

        def register():
            selcal.register_score("good_one", score=lambda v, s: v.max(axis=1))
    ''', "good = goodscores:register")
    sites = (broken, clash, good)
    done = _selcal(["evaluate", "--help"], *sites)  # (loaded when a command runs or its help names the scores)
    assert done.returncode == 0 and "good_one" in done.stdout, done.stderr
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2, done.stderr
    assert any("'broken' (brokenscores:go)" in w and "ModuleNotFoundError" in w for w in warnings)
    assert any("'msp' (entry point 'clash' (clashscores:register)" in w and "(built into selcal)" in w
               and "none of its scores is kept" in w for w in warnings)
    logits, labels = data()
    path = tmp_path / "m.npz"
    np.savez(path, logits=logits, labels=labels)
    done = _selcal(["evaluate", str(path), "--scores", "msp,good_one", "--json", "-"], *sites)
    assert done.returncode == 0, done.stderr
    assert "good_one" in json.loads(done.stdout)["models"][0]["scores"]
    done = _selcal(["evaluate", str(path), "--scores", "fine_one"], *sites)  # the clashing plug-in's: not kept
    assert done.returncode == 2 and "fine_one" in done.stderr
