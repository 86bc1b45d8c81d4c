"""Everything that writes files (the readers are :mod:`selcal.io`):

    output.py     the output transaction of a run: every file under its final name, together, when complete
    dump/         ``selcal dump``: a timm model's logits over an image folder, written as a selcal dump
    ensemble.py   ``selcal ensemble``: a deep ensemble's dump from its members' dumps

Pixels of figures are written by :mod:`selcal.figures` through :class:`output.Outputs`.
"""
