"""A result into an MLflow run: every metric under its flat name, the options as params, the JSON,
the figures and the HTML report as artifacts (``selcal evaluate ... --mlflow``; the extra
``selcal[mlflow]``).

The metric names are :func:`selcal.writers.flat.flat_metrics`'s, the one mapping of every flat
export (``msp/aurc``, ``msp/cov_at_risk_0.01``, ``nll``; ``MODEL/...`` with several models;
``..._ci_low``/``..._ci_high`` for intervals). The params are the options of the JSON under
``selcal.`` (``selcal.bins``, ``selcal.scores``: lists comma-joined), so that they do not clash
with a training run's own. mlflow is imported only here.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import SelcalError
from .flat import flat_metrics

__all__ = ["log_to_mlflow", "run_params", "require_mlflow", "ARTIFACT_PATH"]

ARTIFACT_PATH = "selcal"  # the run's artifact folder: result.json, report.html, figures/
_BATCH_METRICS, _BATCH_PARAMS = 1000, 100  # MLflow's limits of one log_batch


def require_mlflow():
    """The mlflow module, or a one-line error saying how to install it."""
    try:
        import mlflow
    except ImportError:
        raise SelcalError("--mlflow needs the mlflow package: pip install 'selcal[mlflow]'") from None
    return mlflow


def run_params(result) -> dict[str, str]:
    """The run's params: the options and the bootstrap's settings of the JSON, and selcal's version,
    each under ``selcal.`` (lists as comma-joined text).

    Examples
    --------
    >>> import selcal
    >>> params = run_params(selcal.evaluate_arrays([[2.0, 0.0], [0.0, 1.0]], [0, 1], scores="msp,max_logit"))
    >>> params["selcal.scores"], params["selcal.bins"]
    ('msp,max_logit', '15')
    """
    document = result.to_dict()
    out = {"selcal.version": str(document["selcal"])}
    for section, prefix in ((document.get("options") or {}, "selcal."),
                            (document.get("bootstrap") or {}, "selcal.bootstrap.")):
        for key, value in section.items():
            out[prefix + key] = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return out


def _run_id(mlflow, run) -> tuple[str, bool]:
    """(run id, whether selcal started it and must end it): ``run`` (a run id, or an MLflow Run or
    ActiveRun), else the active run, else a new run of the current experiment."""
    if run is not None:
        return (run if isinstance(run, str) else run.info.run_id), False
    active = mlflow.active_run()
    if active is not None:
        return active.info.run_id, False
    return mlflow.start_run().info.run_id, True


def log_to_mlflow(result, run=None, *, figures: bool = True, report: bool = True, figure_format: str = "png",
                  prefix: str = "", params: dict[str, Any] | None = None, workers: int = 1,
                  **drawing: Any) -> str:
    """Log ``result`` into an MLflow run; returns the run's id.

    Parameters
    ----------
    result : EvaluationResult
        What ``selcal.evaluate`` or ``selcal.evaluate_arrays`` returned.
    run : str, mlflow Run or ActiveRun, optional
        The run to log into. None: the active run (``with mlflow.start_run():``), else a new run
        of the current experiment, ended when everything is logged. The tracking store is
        MLflow's own setting (``mlflow.set_tracking_uri``, ``MLFLOW_TRACKING_URI``).
    figures, report : bool
        Also log the figures (``selcal/figures/``, in ``figure_format``) and the HTML report
        (``selcal/report.html``); the JSON is always logged (``selcal/result.json``).
    prefix : str
        Put in front of every metric name (e.g. ``"selcal/"``), beside a training run's own metrics.
    params : dict, optional
        More params to log with the options.
    workers : int
        Processes drawing the figures.
    **drawing
        The figures' settings of :func:`selcal.figures.write_plots` (``kinds``, ``ls_alpha``,
        ``at_coverage``), as ``--figures``, ``--ls-alpha`` and ``--at-coverage`` give them.

    Examples
    --------
    >>> import mlflow, selcal  # doctest: +SKIP
    >>> with mlflow.start_run():  # doctest: +SKIP
    ...     selcal.log_to_mlflow(selcal.evaluate("val_logits.parquet"))
    """
    mlflow = require_mlflow()
    from mlflow.entities import Metric, Param

    metrics = {prefix + name: value for name, value in flat_metrics(result).items()}
    all_params = {**run_params(result), **{str(k): str(v) for k, v in (params or {}).items()}}
    client = mlflow.MlflowClient()
    try:
        run_id, started = _run_id(mlflow, run)
    except mlflow.exceptions.MlflowException as exc:
        raise SelcalError(f"MLflow: {(str(exc.message).strip().splitlines() or ['no run'])[0]}") from None
    status = "FAILED"
    try:
        stamp = int(time.time() * 1000)
        names = list(metrics)
        for start in range(0, len(names), _BATCH_METRICS):
            client.log_batch(run_id, metrics=[Metric(n, metrics[n], stamp, 0) for n in names[start:start + _BATCH_METRICS]])
        keys = list(all_params)
        for start in range(0, len(keys), _BATCH_PARAMS):
            client.log_batch(run_id, params=[Param(k, all_params[k]) for k in keys[start:start + _BATCH_PARAMS]])
        with tempfile.TemporaryDirectory(prefix="selcal-mlflow-") as folder:
            _write_artifacts(result, Path(folder), figures=figures, report=report, fmt=figure_format, workers=workers,
                             drawing=drawing)
            client.log_artifacts(run_id, folder, ARTIFACT_PATH)
        status = "FINISHED"
    except (mlflow.exceptions.MlflowException, OSError) as exc:  # a store that refuses or cannot be reached
        reason = (str(getattr(exc, "message", "") or exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SelcalError(f"MLflow run {run_id}: {reason}") from None
    finally:
        if started:
            mlflow.end_run(status=status)
    return run_id


def _write_artifacts(result, folder: Path, *, figures: bool, report: bool, fmt: str, workers: int,
                     drawing: dict[str, Any]) -> None:
    """result.json, figures/ and report.html of ``result`` into ``folder``."""
    (folder / "result.json").write_text(result.to_json(), encoding="utf-8")
    drawn = None
    if figures:
        from ..figures import write_plots

        drawn = write_plots(result, folder / "figures", fmt, keep_data=report and fmt in ("png", "svg"),
                            workers=workers, **drawing)
    if report:
        from ..report.html import write_report

        write_report(result, folder / "report.html", drawn if drawn and fmt in ("png", "svg") else None,
                     workers=workers, **drawing)
