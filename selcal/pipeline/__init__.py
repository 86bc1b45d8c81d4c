"""The evaluation plan of one model, the same in memory and streamed:

    split.py    which rows fit the scores and which are evaluated (the split rule), their provenance
    reduce.py   one pass over the evaluation logits to per-row numbers of every chosen score
    measure.py  fit the scores, reduce, measure every metric (in memory)
    stream.py   the same for a dump read by row batches; files of confidences without logits
    jobs.py     one model as a pure function of a ModelJob; many models on an engine

Imports point down only: jobs -> stream -> measure -> reduce -> split.
"""
