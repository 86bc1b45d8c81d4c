"""The most confident errors of every score and model as CSV (``--errors-csv``)."""

from __future__ import annotations

from ..results import EvaluationResult


ERRORS_CSV_COLUMNS = ("model", "score", "rank", "id", "label", "prediction", "confidence", "rank_percentile")


def confident_errors_csv(result: EvaluationResult) -> str:
    """``--errors-csv``: the most confident errors of every score and model, one row each.

    ``rank`` counts from 1 (the most confident error of that score); ``confidence`` is the
    score's value (a probability for msp and temp) and ``rank_percentile`` the percent of
    the evaluation rows ranked at or above it (ties at mid-rank), both at full precision.
    With pixel rows of segmentation images, a last column ``image`` names each row's image.
    """
    import csv
    import io

    from ..escape import csv_cell

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    images = any(e.image is not None for m in result.models for e in m.confident_errors.values())
    writer.writerow(ERRORS_CSV_COLUMNS + (("image",) if images else ()))
    for model in result.models:
        for score, errors in model.confident_errors.items():
            for rank in range(len(errors)):
                writer.writerow([csv_cell(model.name), csv_cell(score), rank + 1, _id_cell(errors.id[rank]),
                                 int(errors.label[rank]), int(errors.prediction[rank]),
                                 repr(float(errors.confidence[rank])), repr(float(errors.rank_percentile[rank]))]
                                + ([] if not images else ["" if errors.image is None else csv_cell(str(errors.image[rank]))]))
    return out.getvalue()



def _id_cell(value):
    """An id of --errors-csv: a number stays a number, text is neutralised (:func:`selcal.escape.csv_cell`)."""
    import numpy as np

    from ..escape import csv_cell

    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    return csv_cell(str(value))
