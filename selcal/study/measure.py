"""A study, data set by data set: evaluate each run exactly as ``selcal evaluate`` does (the
model jobs of :mod:`selcal.pipeline.jobs`, on any engine), check that the runs of a data set
share their evaluation rows, aggregate every metric over each recipe's runs, and with a
bootstrap add the intervals, the differences against a baseline and their verdicts
(:mod:`selcal.study.twolevel`, :mod:`selcal.study.stats`). Only one data set's runs are held at
a time: what is kept of a run afterwards is its JSON and, for the figures, its curve.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import SelcalError, said
from ..escape import printable
from ..metrics import catalog
from .result import StudyResult
from .runs import Run
from . import stats
from .twolevel import resample_runs, row_seed, run_draws, run_seed, two_level

__all__ = ["measure_study", "study_metrics", "values_of"]


def values_of(model: dict) -> dict[tuple[str | None, str], float | None]:
    """Every number of the metric catalog in a model's JSON (as ``selcal evaluate --json`` writes
    it): (None, key) at model level, (score, key) for a score; in the JSON's order."""
    out: dict = {}

    def number(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, None
        return True, (float(value) if math.isfinite(value) else None)

    for key in catalog.model_level(judged=False):
        if key in model:
            ok, value = number(model[key]) if model[key] is not None else (True, None)
            if ok:
                out[(None, key)] = value
    for score, metrics in (model.get("scores") or {}).items():
        if not isinstance(metrics, dict):
            continue
        for key, value in metrics.items():
            if catalog.get(key) is None:
                continue
            ok, number_ = number(value) if value is not None else (True, None)
            if ok:
                out[(score, key)] = number_
    return out


def study_metrics(first: dict, specs: Sequence) -> list[str]:
    """The study's metrics (the table's columns, the judged ones), qualified: those ``specs``
    (:class:`selcal.checks.specs.Spec`) match in the first run's JSON, else ``check``'s primary
    metrics (accuracy, the AURC of the first score, the ECE of the first score that has one)."""
    from ..checks.check_results import primary_metrics
    from ..checks.load import metrics_of
    from ..checks.specs import require_matches

    if not specs:
        return list(primary_metrics(first))
    found = list(metrics_of({**first, "name": first.get("name", "run")}).values())
    require_matches(specs, found, said("metrics"), "the first run")
    return list(dict.fromkeys(m.name for spec in specs for m in found if spec.matches(m)))  # in the order asked


def _check_same_rows(dataset: str | None, runs: Sequence[Run], models: Sequence, allow_other_data: bool) -> str | None:
    """Refuse the runs of a data set evaluated on other rows (their fingerprints), unless
    ``allow_other_data``: then the note to show."""
    from ..checks.common_ground import leaderboard_warning

    named = [{"name": printable(run.path), "fingerprint": model.extra.get("fingerprint")}
             for run, model in zip(runs, models)]
    other = leaderboard_warning(named)
    if other is None:
        return None
    where = f"data set '{printable(dataset)}': " if dataset is not None else ""
    if not allow_other_data:
        raise SelcalError(f"{where}{other}; a study compares runs on the same evaluation rows "
                          f"(or give {said('allow_other_data', True)})")
    return f"{said('allow_other_data', True)}: {where}{other}"


def _aligned_rows(dataset, runs, models, options) -> list:
    """Each run's per-row values (:class:`selcal.bootstrap.RowData`) with row i the same
    evaluation row in every run: by id when the files have ids, else by position."""
    from ..bootstrap import RowData

    where = f"data set '{printable(dataset)}'" if dataset is not None else "the study"
    sizes = {model.n_eval for model in models}
    if len(sizes) > 1:
        raise SelcalError(f"{where}: {said('bootstrap')} draws the same rows for every run, but its runs have "
                          f"{' and '.join(str(s) for s in sorted(sizes))} evaluation rows")
    datas = [RowData.from_model(model, options) for model in models]
    first = models[0].row_ids
    if first is None or any(model.row_ids is None for model in models):
        return datas
    first = np.asarray(first).astype(str)
    out = []
    for run, model, data in zip(runs, models, datas):
        ids = np.asarray(model.row_ids).astype(str)
        sorter = np.argsort(ids, kind="stable")
        at = np.minimum(np.searchsorted(ids, first, sorter=sorter), ids.size - 1)
        rows = sorter[at]
        if not np.array_equal(ids[rows], first):  # (only with --allow-other-data: other ids)
            rows = np.arange(ids.size)
        out.append(data if np.array_equal(rows, np.arange(rows.size)) else data.take(rows))
    return out


def _average_curve(curves, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample standard deviation over runs of the selective risk at each coverage of
    ``grid`` (the risk of the last operating point at or below that coverage)."""
    risks = []
    for curve in curves:
        coverage = curve.accepted / curve.n
        risk = curve.errors / curve.accepted
        at = np.clip(np.searchsorted(coverage, grid, side="right") - 1, 0, coverage.size - 1)
        risks.append(risk[at])
    risks = np.array(risks)
    std = risks.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(grid.size)
    return risks.mean(axis=0), std


def measure_study(runs: Sequence[Run], *, options, jobs_of: Callable, run_jobs: Callable, metrics_specs=(),
                  baseline: str | None = None, resamples: int, confidence: float,
                  allow_other_data: bool = False, curves: bool = False,
                  progress: Callable[[str, int, int], None] | None = None) -> StudyResult:
    """The study of ``runs`` (see the module notes).

    ``jobs_of(runs)``: the model jobs of a data set's runs (one each); ``run_jobs(jobs)``: their
    results and failures (:func:`selcal.pipeline.jobs.run_jobs` on the chosen engine).
    ``progress(what, done, total)``: ``"runs"`` evaluated, ``"resamples"`` drawn.
    """
    datasets = list(dict.fromkeys(run.dataset for run in runs))
    recipes = sorted(dict.fromkeys(run.recipe for run in runs))
    if baseline is not None:
        if baseline not in recipes:
            raise SelcalError(f"{said('baseline')} {printable(baseline)}: is not a recipe of the study (recipes: "
                              f"{printable(', '.join(recipes))})")
        recipes.remove(baseline)
        recipes.insert(0, baseline)
    fields = list(dict.fromkeys(name for run in runs for name in run.fields))
    result = StudyResult(runs=[], results=[], rows=[], metrics=[], datasets=datasets, recipes=recipes,
                         options=options, baseline=baseline, fields=fields)
    if resamples:
        result.bootstrap = {"resamples": int(resamples), "seed": int(options.seed), "confidence": float(confidence),
                            "method": "two-level (rows shared by the runs of a data set; runs of each recipe); run "
                                      "level: s^2/n with Student's t (Satterthwaite, the fewest runs' degrees of "
                                      "freedom); rows: the noise the runs share"}
    done = 0
    for dataset in datasets:
        members = [run for run in runs if run.dataset == dataset]
        evaluated, failures = run_jobs(jobs_of(members))
        if failures:
            more = f" (and {len(failures) - 1} more run{'s' if len(failures) > 2 else ''})" if len(failures) > 1 else ""
            raise SelcalError(failures[0].message + more)
        models = evaluated.models
        done += len(members)
        if progress is not None:
            progress("runs", done, len(runs))
        note = _check_same_rows(dataset, members, models, allow_other_data)
        if note:
            result.notes.append(note)
        jsons = [model.to_dict() for model in models]
        if not result.metrics:
            result.metrics = study_metrics(jsons[0], metrics_specs)
        _aggregate(result, dataset, members, jsons, models, confidence, resamples, options, progress)
        if curves:
            _add_curves(result, dataset, members, models)
        result.runs += members
        result.results += jsons
        result.warnings += [(model.name, text) for model in models for text in model.warnings]
        del models, evaluated  # the next data set's runs replace these
    if len([d for d in datasets if d is not None]) >= 2:
        result.ranks = _ranks(result)
    _notes(result, confidence)
    return result


def _add_curves(result: StudyResult, dataset, members, models) -> None:
    """The averaged risk-coverage curve of each recipe, for the first score of the study's metrics."""
    scores = [catalog.split_name(m)[0] for m in result.metrics if catalog.split_name(m)[0] is not None]
    score = scores[0] if scores else next(iter(models[0].curves), None)
    if score is None:
        return
    result.curve_score = score
    grid = np.linspace(0.0, 1.0, 201)[1:]
    for recipe in result.recipes:
        chosen = [model.curves[score] for run, model in zip(members, models) if run.recipe == recipe
                  and score in model.curves]
        if chosen:
            mean, std = _average_curve(chosen, grid)
            result.curves.setdefault(dataset, {})[recipe] = {"coverage": grid, "risk": mean, "std": std,
                                                             "runs": len(chosen)}


def _aggregate(result: StudyResult, dataset, members, jsons, models, confidence, resamples, options,
               progress) -> None:
    """The rows of one data set: every metric's summary per recipe; with a bootstrap, the
    intervals of the study's metrics and the differences against the baseline."""
    values = [values_of(model) for model in jsons]
    keys = list(dict.fromkeys(key for run_values in values for key in run_values))
    judged = [catalog.split_name(m) for m in result.metrics]
    by_recipe = {recipe: [i for i, run in enumerate(members) if run.recipe == recipe] for recipe in result.recipes}
    summaries = {(recipe, key): stats.summary([values[i].get(key) for i in index])
                 for recipe, index in by_recipe.items() if index for key in keys}
    resampled = {}
    if resamples:
        wanted: dict = {}
        for score, key in judged:
            if catalog.has_interval(key):
                wanted.setdefault(score or "model", set()).add(key)
        if wanted:
            from ..bootstrap.resample import threads

            datas = _aligned_rows(dataset, members, models, options)
            # one thread unless options.workers says otherwise (each block holds every run's arrays: more
            # threads were slower on the bench's shared cores; CONVENTIONS.md, "Studies")
            per_run = resample_runs(datas, wanted, resamples, row_seed(options.seed, dataset),
                                    threads(options) if options.workers else 1,
                                    None if progress is None else lambda d: progress("resamples", d, resamples))
            for recipe, index in by_recipe.items():
                if not index:
                    continue
                draws = run_draws(len(index), resamples, run_seed(options.seed, dataset, recipe))
                for score, key in judged:
                    level = score or "model"
                    if key not in wanted.get(level, ()):
                        continue
                    matrix = np.stack([per_run[i].get(level, {}).get(key, np.full(resamples, np.nan))
                                       for i in index])
                    resampled[(recipe, (score, key))] = (matrix, two_level(matrix, draws))
    differences = _differences(result, dataset, judged, summaries, resampled, confidence) \
        if result.baseline is not None else {}
    shared_fields = {}
    for recipe, index in by_recipe.items():
        for name in result.fields:
            seen = {members[i].fields.get(name) for i in index}
            shared_fields[(recipe, name)] = seen.pop() if len(seen) == 1 else None
    for recipe, index in by_recipe.items():
        if not index:
            continue
        for key in keys:
            summary = summaries[(recipe, key)]
            score, metric = key
            row = {"dataset": dataset, "recipe": recipe, "score": score, "metric": metric, "runs": summary.runs,
                   "mean": summary.mean, "std": summary.std, "low": None, "high": None,
                   **{name: shared_fields[(recipe, name)] for name in result.fields}}
            detail = None
            if (recipe, key) in resampled:
                matrix, both = resampled[(recipe, key)]
                spread = stats.interval(summary.mean, [summary], stats.shared_row_variance([(matrix, 1.0)], confidence),
                                        confidence)
                if spread is not None:
                    row["low"], row["high"] = spread.low, spread.high
                detail = _detail(spread, both, confidence, summary.runs)
            if result.baseline is not None:
                row.update({"diff": None, "diff_low": None, "diff_high": None, "p": None, "verdict": None})
                if (recipe, key) in differences:
                    row.update(differences[(recipe, key)][0])
                    detail = {**(detail or {}), "difference": differences[(recipe, key)][1]}
                elif recipe != result.baseline and key in judged:
                    base = summaries.get((result.baseline, key))
                    if base is not None and None not in (base.mean, summary.mean):
                        row["diff"] = summary.mean - base.mean
            result.rows.append(row)
            result.details.append(detail)


def _detail(spread, both, confidence, runs) -> dict:
    """How an interval was made (the JSON's ``interval``): se, degrees of freedom, the two
    variances, and the plain two-level percentile interval, for reference."""
    from ..bootstrap import percentile_interval

    out = {"plain_percentile": percentile_interval(both, confidence)}
    if spread is not None:
        out.update(se=spread.se, df=spread.df if math.isfinite(spread.df) else None,
                   row_variance=spread.row_variance, run_variance=spread.run_variance)
    if runs == 1:
        out["rows_only"] = True
    return out


def _differences(result, dataset, judged, summaries, resampled, confidence) -> dict:
    """(recipe, metric) -> (the baseline columns, their detail) for every judged pair with intervals,
    verdicts by Holm's procedure over the pairs of the data set."""
    base = result.baseline
    pairs = []
    for recipe in result.recipes:
        if recipe == base:
            continue
        for key in judged:
            if (recipe, key) not in resampled or (base, key) not in resampled:
                continue
            mine, theirs = summaries[(recipe, key)], summaries[(base, key)]
            if mine.mean is None or theirs.mean is None:
                continue
            difference = mine.mean - theirs.mean
            rows_mine, both_mine = resampled[(recipe, key)]
            rows_base, both_base = resampled[(base, key)]
            shared = stats.shared_row_variance([(rows_mine, 1.0), (rows_base, -1.0)], confidence)
            spread = stats.interval(difference, [mine, theirs], shared, confidence)
            direction = catalog.better(key[1])
            plain_ci, plain_p = stats.percentile_difference(both_mine - both_base, direction, confidence)
            pairs.append((recipe, key, difference, spread, direction, plain_ci, plain_p))
    pvalues = [None if spread is None else stats.pvalue(difference, spread)
               for _, _, difference, spread, _, _, _ in pairs]
    verdicts = stats.verdicts([p[2] for p in pairs], pvalues, [p[4] for p in pairs], confidence)
    plain = stats.verdicts([p[2] for p in pairs], [p[6] for p in pairs], [p[4] for p in pairs], confidence)
    out = {}
    for (recipe, key, difference, spread, _, plain_ci, plain_p), p, verdict, plain_verdict in \
            zip(pairs, pvalues, verdicts, plain):
        columns = {"diff": difference, "diff_low": None if spread is None else spread.low,
                   "diff_high": None if spread is None else spread.high, "p": p, "verdict": verdict}
        detail = {"plain_percentile": plain_ci, "plain_p": plain_p, "plain_verdict": plain_verdict}
        if spread is not None:
            detail.update(se=spread.se, df=spread.df if math.isfinite(spread.df) else None,
                          row_variance=spread.row_variance, run_variance=spread.run_variance)
        out[(recipe, key)] = (columns, detail)
    return out


def _ranks(result: StudyResult) -> dict:
    """metric -> recipe -> mean rank over the data sets, for every study metric with a direction."""
    out = {}
    for metric in result.metrics:
        score, key = catalog.split_name(metric)
        direction = catalog.better(key)
        if direction is None:
            continue
        means = {}
        for row in result.rows:
            if (row["score"], row["metric"]) == (score, key):
                means.setdefault(row["dataset"], {})[row["recipe"]] = row["mean"]
        out[metric] = stats.mean_ranks(means, direction)
    return out


def _notes(result: StudyResult, confidence: float) -> None:
    single = sorted({row["recipe"] for row in result.rows if row["runs"] == 1})
    if single:
        result.notes.append(f"one run only: {printable(', '.join(single))}; "
                            + ("its interval holds the rows' noise only, not the run-to-run noise"
                               if result.bootstrap else "no standard deviation"))
    if result.baseline is not None and not result.bootstrap:
        result.notes.append(f"no verdicts without intervals: give {said('bootstrap', metavar='B')} (e.g. 1000) to "
                            f"judge the recipes against {printable(result.baseline)}")
    without = [m for m in result.metrics if not catalog.has_interval(catalog.split_name(m)[1])]
    if result.bootstrap and without:
        result.notes.append(f"no interval (not a mean over rows): {', '.join(without)}")
