"""The built-in scores: one registry entry each (CONVENTIONS.md, "Scores").

msp, max_logit, pnorm and temp are entries like the rest; their order here is the order of
the report's columns. A new built-in score is one entry below (plus its functions in
:mod:`selcal.scores.functions` or its fit in :mod:`selcal.scores.fits`, and its tests).
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import numpy as np

from . import calibrators as _calibrators
from . import fits
from .functions import ChunkTerms, energy, gini, logit_margin, margin, negative_entropy, normalised_logits, pnorm
from .registry import BoardColumn, Display, Score, add

__all__: list[str] = []


def _number(value: float) -> str:
    """Four decimals, or four significant digits beyond 1e6 (as the tables show numbers)."""
    return f"{value:.4f}" if abs(value) < 1e6 else f"{value:.4g}"


# ------------------------------------------------------------------------------ msp
add(Score(
    "msp", softmax=lambda t, state: (t.logits, 1.0, None), own_predictions=False,
    reports=(), model_probabilities=True,  # its NLL, Brier and class-wise ECE are the model's own
    groups=("calibrators",),
    display=Display(
        "MSP", "maximum softmax probability", colour="#1f77b4", sweep_label="before T (msp)",
        leaderboard=(BoardColumn("ece_msp", "ECE msp", lambda s: s.get("msp", {}).get("ece"), place="summary",
                                 rank=2, short="ECE", title="ECE before T: msp"),)),
))

# ------------------------------------------------------------------------ max_logit
add(Score("max_logit", score=lambda t, state: t.top, raw_logits=True,
          display=Display("max logit", "largest logit", colour="#ff7f0e")))


# ---------------------------------------------------------------------------- pnorm
def _fit_pnorm(val_logits, val_labels, options) -> fits.PnormFit:
    return fits.fit_pnorm(val_logits, val_labels, options.p_grid, center=options.center,
                          objective=options.pnorm_objective, estimator=options.aurc_estimator)


def _pnorm_values(t: ChunkTerms, state) -> object:
    return t.cached(("pnorm", state.p, state.center), lambda: pnorm(t.logits, state.p, state.center, t.shifted))


def _search_note(name: str, fitted: str, m: dict) -> str:
    """The fit note of a score searched by a validation objective, which may fall back to MSP."""
    centre = "centred" if m["center"] else "uncentred"
    return (f"{name}: {fitted} ({centre}, by validation {str(m.get('objective', 'aurc')).upper()})"
            + ("; falls back to MSP, which is no worse on validation" if m["fallback"] else ""))


def _centred(options) -> bool:
    """Centred, the p-norm scores see v - mean(v): a shift of a row's logits changes nothing."""
    return bool(options.center)


def _pnorm_note(m: dict) -> str:
    return _search_note("pnorm", f"p = {m['p']}", m)


add(Score(
    "pnorm", score=lambda t, state: t.log_msp if state.fallback else _pnorm_values(t, state),
    fit=_fit_pnorm, raw_logits=True, shift_invariant_when=_centred,
    options=("p_grid", "center", "pnorm_objective"),
    describe=lambda state, measured: dict(
        p=state.p, fallback=state.fallback, center=state.center, objective=state.objective,
        val_objective={str(p): v for p, v in state.val_objective.items()}, val_objective_msp=state.val_objective_msp),
    probability_when=lambda m: bool(m.get("fallback")),  # it is MSP then
    # the p-norm score at the chosen p even when it falls back to MSP: the p-norm-given-v_max figure
    extra_rows=lambda t, state, options: {"pnorm": _pnorm_values(t, state)}
    if options.logit_profile or not state.fallback else {},
    display=Display(
        "p-norm", "max_k (v_k - mu) / ||v - mu||_p, p fitted by validation AURC", colour="#2ca02c",
        note=_pnorm_note, note_rank=1,
        legend=lambda m: " (falls back to MSP)" if m.get("fallback") else f" (p = {m['p']})" if m.get("p") is not None
        else "",
        leaderboard=(
            BoardColumn("p", "p", lambda s: s.get("pnorm", {}).get("p"), kind="int", lower_is_better=None,
                        flag=lambda s: s["pnorm"].get("fallback") if "pnorm" in s else None, flag_key="pnorm_fallback",
                        flag_note="p (fb): pnorm fell back to MSP, no better on validation"),
            BoardColumn("pnorm_gain", "pnorm gain",
                        lambda s: s["msp"]["aurc"] - s["pnorm"]["aurc"] if "msp" in s and "pnorm" in s else None,
                        lower_is_better=False, place="summary", rank=1, short="gain",
                        note="(pnorm) gain = AURC(msp) - AURC(pnorm)"),
        )),
))


# ----------------------------------------------------------------------------- temp
_LAST_TEMPERATURE: list = [None, None, None]  # weak references to (val_logits, val_labels), and their fit


def _temperature_fit(val_logits, val_labels) -> fits.TemperatureFit:
    """fits.fit_temperature, fitted once for temp and the calibrators that start from T (same arrays).

    The arrays are held by weak references, so that a finished model's validation rows are freed
    before the next model's are read."""
    logits_ref, labels_ref, fit = _LAST_TEMPERATURE
    if logits_ref is not None and logits_ref() is val_logits and labels_ref() is val_labels:
        return fit
    fit = fits.fit_temperature(val_logits, val_labels)
    try:
        _LAST_TEMPERATURE[:] = [weakref.ref(val_logits), weakref.ref(val_labels), fit]
    except TypeError:  # an array type without weak references: not kept
        _LAST_TEMPERATURE[:] = [None, None, None]
    return fit


def _fit_temp(val_logits, val_labels, options) -> fits.TemperatureFit:
    fit = _temperature_fit(val_logits, val_labels)
    if options.temp_objective == "aurc":
        temperature, val_aurc = fits.fit_temperature_by_aurc(val_logits, val_labels, fit.temperature,
                                                             estimator=options.aurc_estimator)
        fit = replace(fit, temperature=temperature, gradient=None, objective="aurc", val_objective=val_aurc,
                      nll_after=fits.mean_nll(val_logits, val_labels, 1.0 / temperature),
                      nll_temperature=fit.temperature)
    return fit


def _temp_warnings(fit: fits.TemperatureFit) -> list[str]:
    out = []
    if fit.fallback:
        out.append(f"temperature not identifiable ({fit.fallback} on the validation rows): T = 1 kept")
    if fit.nll_temperature is not None and not 1 / 63 < fit.temperature / fit.nll_temperature < 63:
        out.append(f"the validation AURC is lowest at the edge of the temperature grid (T = "
                   f"{fit.temperature:.4g}, a factor 64 from the NLL-optimal {fit.nll_temperature:.4g})")
    return out


def _temp_note(t: dict) -> str:
    chosen = "by validation AURC, " if t.get("objective") == "aurc" else ""
    return (f"temp: T = {_number(t['temperature'])} ({chosen}validation NLL "
            f"{_number(t['val_nll_before'])} -> {_number(t['val_nll_after'])})")


add(Score(
    "temp", softmax=lambda t, state: (t.logits, 1.0 / state.temperature, t.pred),
    fit=_fit_temp, own_predictions=False, options=("temp_objective",), warnings=_temp_warnings,
    groups=("calibrators",),
    interval_keys=("temperature",),
    describe=lambda state, measured: dict(
        temperature=state.temperature, **measured, val_nll_before=state.nll_before, val_nll_after=state.nll_after,
        gradient=state.gradient, temperature_fallback=state.fallback, objective=state.objective),
    display=Display(
        "temperature-scaled MSP", "temperature-scaled MSP, T fitted by validation NLL", note=_temp_note, note_rank=0,
        legend=lambda m: f" (T = {m['temperature']:.2f})" if m.get("temperature") is not None else "",
        sweep_label="after T (temp)", colour="#9467bd", line=(0, (5, 2)),  # dashed: ranks like msp
        leaderboard=(BoardColumn("ece_temp", "ECE temp", lambda s: s.get("temp", {}).get("ece"), place="summary",
                                 rank=3, short="ECE T", note="ECE before/after (T) temperature scaling",
                                 title="ECE after T: temp"),
                     BoardColumn("T", "T", lambda s: s.get("temp", {}).get("temperature"), kind="num", place="report",
                                 rank=4, lower_is_better=None))),
))

# ------------------------------------------------------------- scores of the logits alone
add(Score("energy", score=lambda t, state: energy(None, t), raw_logits=True,
          display=Display(description="logsumexp of the logits (negative free energy)")))
add(Score("entropy", score=lambda t, state: negative_entropy(None, t),
          display=Display(description="negative entropy of the softmax, sum_k p_k log p_k")))
add(Score("margin", score=lambda t, state: margin(None, t),
          display=Display(description="p_(1) - p_(2), gap between the two largest probabilities")))
add(Score("logit_margin", score=lambda t, state: logit_margin(None, t),
          display=Display(description="v_(1) - v_(2), gap between the two largest logits")))
add(Score("gini", score=lambda t, state: gini(None, t), display=Display(description="sum_k p_k^2 (DOCTOR)")))


# -------------------------------------------------------------------- pnorm_softmax
def _fit_pnorm_softmax(val_logits, val_labels, options) -> fits.PnormSoftmaxFit:
    return fits.fit_pnorm_softmax(val_logits, val_labels, options.p_grid, center=options.center,
                                  estimator=options.aurc_estimator)


def _pnorm_softmax_note(m: dict) -> str:
    note = _search_note("pnorm_softmax", f"p = {m['p']}, T = {m['temperature']:.4g}", m)
    if m["fallback"] or m.get("ece") is None:
        return note
    return (note + "; T is chosen for ranking, not calibration, so its probabilities are not calibrated by "
            f"construction: its ECE of {100 * m['ece']:.1f}% is expected, not a defect")


add(Score(
    "pnorm_softmax", softmax=lambda t, state: (t.logits, 1.0, None) if state.fallback else
    (normalised_logits(t.logits, state.p, state.center), 1.0 / state.temperature, None),
    fit=_fit_pnorm_softmax, raw_logits=True, shift_invariant_when=_centred, own_predictions=False, reports=(), options=("p_grid", "center"),
    describe=lambda state, measured: dict(
        p=state.p, temperature=state.temperature, fallback=state.fallback, center=state.center, objective="aurc",
        val_objective=state.val_objective, val_objective_msp=state.val_objective_msp),
    display=Display(description="MSP of z_c / (T ||z_c||_p), p and T fitted by validation AURC (Cattelan & Silva)",
                    note=_pnorm_softmax_note),
))


# -------------------------------------------------------------- post-hoc calibrators
# CONVENTIONS.md, "Post-hoc calibrators": fitted on the validation rows like temp, judged as the
# classifier each produces (its own top label), with its probabilities for the calibration metrics.
def _log_probabilities(name: str):
    """The calibrated log-probabilities of a chunk, computed once for the score and the probabilities."""
    return lambda t, state: t.cached(("calibrated", name), lambda: state.log_probabilities(t.logits))


def _convex_keys(state, measured: dict) -> dict:
    return dict(**measured, params=state.params(), val_objective=state.val_objective,
                gradient_norm=state.gradient_norm, iterations=state.iterations)


def _convex_note(name: str):
    return lambda m: (f"{name}: validation objective {_number(m['val_objective'])} (regularised NLL; gradient norm "
                      f"{m['gradient_norm']:.1e}, {m['iterations']} trust-region iterations)")


def _fit_vector(val_logits, val_labels, options):
    return _calibrators.fit_vector(val_logits, val_labels, mu=options.odir_mu,
                                   temperature=_temperature_fit(val_logits, val_labels).temperature)


def _fit_dirichlet(val_logits, val_labels, options):
    return _calibrators.fit_dirichlet(val_logits, val_labels, odir_lambda=options.odir_lambda, mu=options.odir_mu,
                                      temperature=_temperature_fit(val_logits, val_labels).temperature)


def _fit_ets(val_logits, val_labels, options):
    return _calibrators.fit_ets(val_logits, val_labels, _temperature_fit(val_logits, val_labels).temperature)


def _fit_isotonic(val_logits, val_labels, options):
    return _calibrators.fit_isotonic(val_logits, val_labels)


def _infinite_nll(m: dict) -> str:
    count = m.get("nll_infinite_rows")
    return f"; NLL infinite on {count} rows (their label has probability 0): null" if count else ""


_vector_lp, _dirichlet_lp = _log_probabilities("vector"), _log_probabilities("dirichlet")
add(Score(
    "vector", fit=_fit_vector, score=lambda t, state: np.max(_vector_lp(t, state), axis=1), log_confidence=True,
    probabilities=lambda t, state: np.exp(_vector_lp(t, state)), raw_logits=True, options=("odir_mu",),
    reports=("nll", "brier"), describe=_convex_keys, groups=("calibrators",), in_all=False, per_class=True,
    reproducible_to=_calibrators.REPRODUCIBLE_TO,
    display=Display("vector scaling", "vector scaling, softmax(w * v + b), fitted by validation NLL",
                    note=_convex_note("vector"), note_rank=2, colour="#8c564b"),
))
add(Score(
    "dirichlet", fit=_fit_dirichlet, score=lambda t, state: np.max(_dirichlet_lp(t, state), axis=1),
    log_confidence=True, probabilities=lambda t, state: np.exp(_dirichlet_lp(t, state)),
    options=("odir_lambda", "odir_mu"), reports=("nll", "brier"), describe=_convex_keys, groups=("calibrators",),
    in_all=False, per_class=True,
    precheck=lambda n_val, n_classes, options: _calibrators.check_dirichlet_size(n_val, n_classes),
    reproducible_to=_calibrators.REPRODUCIBLE_TO,
    display=Display("Dirichlet (ODIR)",
                    "Dirichlet calibration (ODIR), softmax(W log softmax(v) + b), fitted by validation NLL",
                    note=_convex_note("dirichlet"), note_rank=3, colour="#e377c2"),
))
add(Score(
    "ets", fit=_fit_ets, probabilities=lambda t, state: state.probabilities(t.logits), reports=("nll", "brier"),
    describe=lambda state, measured: dict(**measured, params=state.params(), val_objective=state.val_objective,
                                          kkt_residual=state.kkt_residual),
    groups=("calibrators",), in_all=False, reproducible_to=_calibrators.REPRODUCIBLE_TO,
    display=Display(
        "ensemble TS", "ensemble temperature scaling, w1 softmax(v/T) + w2 softmax(v) + w3/K",
        note=lambda m: ("ets: weights " + ", ".join(f"{w:.4f}" for w in m["params"]["weights"])
                        + f" (T = {_number(m['params']['temperature'])}, "
                        f"validation NLL {_number(m['val_objective'])})"),
        note_rank=4, colour="#7f7f7f"),
))
add(Score(
    "isotonic", fit=_fit_isotonic, probabilities=lambda t, state: state.probabilities(t.logits),
    reports=("nll", "brier"),
    describe=lambda state, measured: dict(**measured, points=[len(x) for x in state.thresholds]),
    groups=("calibrators",), in_all=False, per_class=True,
    display=Display(
        "isotonic", "one-vs-rest isotonic regression of softmax(v)_k, renormalised (scikit-learn's)",
        note=lambda m: f"isotonic: {sum(m['points'])} breakpoints over {len(m['points'])} classes" + _infinite_nll(m),
        note_rank=5, colour="#bcbd22"),
))
