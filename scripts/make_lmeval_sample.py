"""Write the synthetic lm-evaluation-harness sample logs of sample_logits/lm_eval/ (no network).

Two simulated language models answer two simulated tasks; each log is written the way the
harness writes ``lm_eval --log_samples`` logs (checked against EleutherAI/lm-evaluation-harness
@ 4e7e0d4: ``lm_eval/evaluator.py`` builds each sample, ``lm_eval/loggers/evaluation_tracker.py``
``save_results_samples`` writes it):

- path ``<output_path>/<model_name_sanitized>/samples_<task>_<date>.jsonl`` with ``<date>`` =
  ``datetime.isoformat()`` with ``:`` replaced by ``-``;
- one JSON object per question, keys in the harness's order: ``doc_id``, ``doc``, ``target``
  (``str`` of the gold index), ``arguments`` (``{"gen_args_i": {"arg_0": context, "arg_1":
  " " + choice_i}}``), ``resps`` (per choice ``[[ll, is_greedy]]``) and ``filtered_resps`` (per
  choice ``[ll, is_greedy]``, the ``take_first`` filter), both turned into strings as
  ``sanitize_list`` does, ``filter`` (``"none"``), ``metrics``, the three sha256 hashes, and the
  metric values; written with ``json.dumps(sample, ensure_ascii=False)``;
- ``acc`` = [argmax ll = gold], ``acc_norm`` = [argmax ll / len(choice) = gold] (characters of
  the choice without the delimiter), as ``ConfigurableTask.process_results`` computes them.

The questions are placeholders ("Synthetic question 17 ..."), not MMLU or ARC text. Task
``mmlu_synth`` has four letter choices (" A" .. " D", as MMLU's default prompt), 150 questions;
``arc_synth`` (100 questions) has answer texts of different lengths and 3, 4 or 5 choices (as
ARC has a few questions with 3 or 5). A model's log-likelihood of choice j is that of a simulated next-token distribution: the model "knows" a question with a probability that
grows with its size, puts more mass on the gold choice when it knows it, and a text answer
costs about 1.3 nats per word, so long answers are penalised and ``acc_norm`` differs from
``acc``. The larger model is over-confident on the questions it gets wrong more often.

Run: ``python scripts/make_lmeval_sample.py [OUT_FOLDER]`` (default sample_logits/lm_eval).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

DATE = "2026-11-25T14-00-00.000000"
MODELS = {"synthetic__llm-small": (0.35, 1.2, 11), "synthetic__llm-large": (0.65, 2.4, 12)}  # know, sharpness, seed
WORDS = ("cell", "energy", "river", "market", "protein", "orbit", "law", "voltage", "glacier", "theorem", "enzyme",
         "trade", "signal", "mass", "current", "species", "court", "tariff", "photon", "delta")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sanitize(value):
    """What lm_eval.utils.sanitize_list does: every leaf as a string, tuples kept as tuples."""
    if isinstance(value, list):
        return [sanitize(v) for v in value]
    if isinstance(value, tuple):
        return tuple(sanitize(v) for v in value)
    return str(value)


def questions(task: str, rng: np.random.Generator):
    """(doc, context, choices, gold) per question of ``task``."""
    if task == "mmlu_synth":
        for i in range(150):
            texts = [" ".join(rng.choice(WORDS, size=2)) for _ in range(4)]
            gold = int(rng.integers(4))
            question = f"Synthetic question {i}: which option is right?"
            context = question + "".join(f"\n{'ABCD'[j]}. {t}" for j, t in enumerate(texts)) + "\nAnswer:"
            yield {"question": question, "subject": "synthetic", "choices": texts, "answer": gold}, context, \
                ["A", "B", "C", "D"], gold
    else:
        for i in range(100):
            k = int(rng.choice([3, 4, 4, 4, 4, 5]))
            texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)))) for _ in range(k)]
            gold = int(rng.integers(k))
            question = f"Synthetic question {i}: what completes the statement?"
            doc = {"id": f"synth-{i}", "question": question,
                   "choices": {"text": texts, "label": [chr(65 + j) for j in range(k)]}, "answerKey": chr(65 + gold)}
            yield doc, f"Question: {question}\nAnswer:", texts, gold


def loglikelihoods(choices, gold, task, know, sharpness, rng) -> np.ndarray:
    """The simulated model's log-likelihood of each continuation " " + choice."""
    knows = rng.random() < know
    scores = rng.normal(0.0, 1.0, size=len(choices))
    if knows:
        scores[gold] += sharpness * (1.0 + rng.random())
    else:
        scores[int(rng.integers(len(choices)))] += sharpness * rng.random()  # a confident guess
    log_share = scores - np.logaddexp.reduce(scores)
    if task == "mmlu_synth":  # the letters take about 80% of the next-token mass
        return log_share + np.log(0.8)
    words = np.array([len(c.split()) for c in choices], dtype=float)
    return log_share - 1.3 * words + rng.normal(0.0, 0.2, size=len(choices))


def write(folder: Path) -> list[Path]:
    written = []
    for model, (know, sharpness, seed) in MODELS.items():
        rng = np.random.default_rng(seed)
        for task in ("mmlu_synth", "arc_synth"):
            path = folder / model / f"samples_{task}_{DATE}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            qrng = np.random.default_rng(7 if task == "mmlu_synth" else 8)  # the same questions for both models
            with open(path, "w", encoding="utf-8") as handle:
                for doc_id, (doc, context, choices, gold) in enumerate(questions(task, qrng)):
                    lls = loglikelihoods(choices, gold, task, know, sharpness, rng)
                    greedy = [bool(j == int(np.argmax(lls)) and rng.random() < 0.9) for j in range(len(choices))]
                    arguments = [(context, f" {c}") for c in choices]
                    results = [(float(ll), g) for ll, g in zip(lls, greedy)]
                    lengths = np.array([float(len(c)) for c in choices])
                    metrics = {"acc": 1.0 if int(np.argmax(lls)) == gold else 0.0,
                               "acc_norm": 1.0 if int(np.argmax(lls / lengths)) == gold else 0.0}
                    sample = {
                        "doc_id": doc_id, "doc": doc, "target": gold,
                        "arguments": arguments, "resps": [[r] for r in results], "filtered_resps": results,
                        "filter": "none", "metrics": list(metrics),
                        "doc_hash": sha256(json.dumps(doc, indent=2, ensure_ascii=False)),
                        "prompt_hash": sha256(context), "target_hash": sha256(str(gold)),
                    }
                    sample.update(metrics)
                    # save_results_samples: arguments as gen_args_i/arg_j, responses as strings, target as str
                    sample["resps"] = sanitize(sample["resps"])
                    sample["filtered_resps"] = sanitize(sample["filtered_resps"])
                    sample["arguments"] = {f"gen_args_{i}": {f"arg_{j}": a for j, a in enumerate(arg)}
                                           for i, arg in enumerate(sample["arguments"])}
                    sample["target"] = str(sample["target"])
                    handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
            written.append(path)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "sample_logits" / "lm_eval"
    for path in write(out):
        print(path)
