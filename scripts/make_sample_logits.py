#!/usr/bin/env python
"""Build the small sample-logits collection in ``sample_logits/``.

Reads five models from the shared collection of saved classifier outputs
(``val.npz`` / ``test.npz`` with float32 ``logits`` N x K and int64 ``labels``)
and writes one Parquet file per model plus ``sample_logits/README.md``.

Usage:
    python scripts/make_sample_logits.py [REALDATA_DIR] [--out OUT_DIR]

REALDATA_DIR defaults to ``../shared/realdata`` relative to the repository
root; OUT_DIR defaults to ``sample_logits`` in the repository root.

Parquet layout (zstd):
    id      string   "<source file>/<row index in that file, 6 digits>",
                     e.g. "val/000017", "test/004211"
    split   string   "val" or "test"
    label   int64
    logits  fixed_size_list<float32>[K]   exact float32 values from the source
                     (log-probabilities for a model of kind "logprob", whose
                     source saved only softmax outputs)
Rows: val first, then test, each in source order.
Schema metadata: selcal.source, selcal.model, selcal.dataset, selcal.licence,
selcal.source_path, selcal.split_method.

For a model whose source has only a test split, the test rows are split with
``numpy.random.default_rng(0).permutation(N)``: the first round(0.2 * N)
indices (sorted) become "val", the rest (sorted) "test". Their ids keep the
"test/" prefix because the id names the row of the source file.

After writing, every file is read back and checked bit for bit against the
source arrays.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REALDATA = REPO_ROOT / ".." / "shared" / "realdata"
DEFAULT_OUT = REPO_ROOT / "sample_logits"
MAX_TOTAL_BYTES = 15 * 1024 * 1024
VAL_FRACTION = 0.2
SPLIT_SEED = 0

# Source repository @ commit is taken from realdata/README.md (the manifest
# records only the repository); licence, model and dataset strings for the
# Parquet metadata come from manifest.json. `repo` is checked against it.
MODELS = [
    {
        "short": "calibrator_cifar10_resnet50_ce",
        "repo": "Linwei94/calibrator",
        "commit": "1816965",
        "kind": "logits",
        "model_short": "ResNet-50, cross-entropy",
        "dataset_short": "CIFAR-10",
        "licence_note": "MIT; the Linwei94/calibrator LICENSE is the MIT text of the "
        "PyPA sample project.",
        "note": "Same ResNet-50 and same val/test rows as the focal-loss file; "
        "only the training loss differs (cross-entropy).",
    },
    {
        "short": "calibrator_cifar10_resnet50_focal",
        "repo": "Linwei94/calibrator",
        "commit": "1816965",
        "kind": "logits",
        "model_short": "ResNet-50, focal loss",
        "dataset_short": "CIFAR-10",
        "licence_note": "MIT; the Linwei94/calibrator LICENSE is the MIT text of the "
        "PyPA sample project.",
        "note": "Focal-loss twin of the cross-entropy file: about the same accuracy, "
        "smaller logits (largest absolute value 9.6 vs 18.4).",
    },
    {
        "short": "sctl_cifar10lt_resnet110",
        "repo": "SeungjinJung/SCTL",
        "commit": "1f8585e",
        "kind": "logits",
        "model_short": "ResNet-110",
        "dataset_short": "CIFAR-10-LT",
        "licence_note": "MIT (SeungjinJung/SCTL).",
        "note": "Long-tailed validation split (class counts 2507 down to 273), "
        "balanced test split; logits down to -119, and float32 softmax gives "
        "max probability exactly 1.0 on about 28% of rows.",
    },
    {
        "short": "markus93_densenet40_c10",
        "repo": "zongyuange/Workshop-repository",
        "commit": "a6765b0",
        "kind": "logits",
        "model_short": "DenseNet-40 (Keras)",
        "dataset_short": "CIFAR-10",
        "licence_note": "MIT, Copyright (c) 2018 Markus K\u00e4ngsepp (markus93/NN_calibration). "
        "The file was obtained as a plain blob from zongyuange/Workshop-repository, which "
        "states no licence of its own; per `../shared/realdata/README.md` it is "
        "byte-identical (sha256 4d23b6ba\u2026) to the Git-LFS object "
        "`logits/probs_densenet40_c10_logits.p` of markus93/NN_calibration, whose LICENSE "
        "is MIT, so the data is that repository's, under that licence.",
        "note": "The standard calibration-benchmark logits of the Guo et al. (2017) "
        "setting (DenseNet-40 on CIFAR-10), from the markus93/NN_calibration set "
        "used by Kull et al. (2019). Raw logits up to 75; float32 softmax gives max "
        "probability exactly 1.0 on about 56% of rows, which max-logit still ranks apart.",
    },
    {
        "short": "netcal_densenetbc100c100",
        "repo": "EFS-OpenSource/calibration-framework",
        "commit": "2a3db8d",
        "kind": "logprob",
        "model_short": "DenseNet-BC-100",
        "dataset_short": "CIFAR-100",
        "licence_note": "Apache-2.0 (EFS-OpenSource/calibration-framework, "
        "`examples/classification/records`).",
        "note": "Stored as log-probabilities (kind `logprob`: log of saved float32 softmax), so "
        "max_logit and pnorm are not meaningful on it, and MSP has many exact "
        "ties at 1.0 (top log p exactly 0 on about 7% of rows). The source has "
        "only a test split; val here is a seeded 20% of it.",
    },
]


def load_manifest(realdata: Path) -> dict[tuple[str, str], dict]:
    with open(realdata / "manifest.json") as f:
        manifest = json.load(f)
    return {(r["short"], r["split"]): r for r in manifest["logits"]}


def load_split(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as z:
        logits, labels = z["logits"], z["labels"]
    if logits.dtype != np.float32 or logits.ndim != 2:
        raise ValueError(f"{path}: logits must be float32 N x K, got {logits.dtype} {logits.shape}")
    if labels.dtype != np.int64 or labels.shape != (logits.shape[0],):
        raise ValueError(f"{path}: labels must be int64 of length N, got {labels.dtype} {labels.shape}")
    return logits, labels


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def build_rows(realdata: Path, short: str):
    """Return (rows, sources, split_method).

    rows: list of (split, source_file, source_indices) in output order.
    sources: {source_file: (logits, labels)}.
    """
    folder = realdata / short
    sources = {}
    for name in ("val", "test"):
        p = folder / f"{name}.npz"
        if p.exists():
            sources[name] = load_split(p)
    if set(sources) == {"val", "test"}:
        rows = [(s, s, np.arange(len(sources[s][1]))) for s in ("val", "test")]
        split_method = "val and test as in the source (all rows of both)"
    elif set(sources) == {"test"}:
        n = len(sources["test"][1])
        n_val = int(round(VAL_FRACTION * n))
        perm = np.random.default_rng(SPLIT_SEED).permutation(n)
        val_idx, test_idx = np.sort(perm[:n_val]), np.sort(perm[n_val:])
        rows = [("val", "test", val_idx), ("test", "test", test_idx)]
        split_method = (
            f"source has only a test split of {n} rows; "
            f"numpy.random.default_rng({SPLIT_SEED}).permutation({n}): first {n_val} "
            f"indices (sorted) -> val, remaining {n - n_val} (sorted) -> test; "
            f"ids keep the source prefix 'test/'"
        )
    else:
        raise FileNotFoundError(f"{folder}: expected val.npz+test.npz or test.npz only")
    K = {s[0].shape[1] for s in sources.values()}
    if len(K) != 1:
        raise ValueError(f"{short}: K differs between splits: {K}")
    return rows, sources, split_method


def make_table(rows, sources, metadata: dict[str, str]) -> pa.Table:
    ids, splits, labels, logits = [], [], [], []
    for split, src, idx in rows:
        src_logits, src_labels = sources[src]
        ids.extend(f"{src}/{i:06d}" for i in idx)
        splits.extend([split] * len(idx))
        labels.append(src_labels[idx])
        logits.append(src_logits[idx])
    labels = np.concatenate(labels)
    logits = np.ascontiguousarray(np.concatenate(logits))
    K = logits.shape[1]
    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("split", pa.string(), nullable=False),
            pa.field("label", pa.int64(), nullable=False),
            pa.field("logits", pa.list_(pa.float32(), K), nullable=False),
        ],
        metadata={k.encode(): v.encode() for k, v in metadata.items()},
    )
    values = pa.array(logits.reshape(-1), type=pa.float32())
    return pa.Table.from_arrays(
        [
            pa.array(ids, type=pa.string()),
            pa.array(splits, type=pa.string()),
            pa.array(labels, type=pa.int64()),
            pa.FixedSizeListArray.from_arrays(values, K),
        ],
        schema=schema,
    )


def verify(path: Path, rows, sources, metadata: dict[str, str]) -> dict:
    """Read the file back and compare with the source bit for bit."""
    t = pq.read_table(path)
    K = next(iter(sources.values()))[0].shape[1]
    expected_types = [pa.string(), pa.string(), pa.int64(), pa.list_(pa.float32(), K)]
    assert t.schema.names == ["id", "split", "label", "logits"], t.schema.names
    assert [f.type for f in t.schema] == expected_types, t.schema
    md = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
    for k, v in metadata.items():
        assert md.get(k) == v, (k, md.get(k), v)

    ids = t.column("id").to_pylist()
    split_col = np.array(t.column("split").to_pylist())
    labels = t.column("label").to_numpy()
    logits = t.column("logits").combine_chunks().flatten().to_numpy().reshape(-1, K)
    assert logits.dtype == np.float32 and labels.dtype == np.int64
    assert len(set(ids)) == len(ids), "duplicate ids"

    stats, top_zero, start = {}, {}, 0
    for split, src, idx in rows:
        n = len(idx)
        sl = slice(start, start + n)
        src_logits, src_labels = sources[src]
        assert (split_col[sl] == split).all()
        assert ids[sl] == [f"{src}/{i:06d}" for i in idx]
        # bit-for-bit: compare the raw float32 bit patterns
        assert np.array_equal(logits[sl].view(np.uint32), src_logits[idx].view(np.uint32))
        assert np.array_equal(labels[sl], src_labels[idx])
        stats[split] = (n, accuracy(logits[sl], labels[sl]))
        top_zero[split] = int(np.sum(logits[sl].max(axis=1) == 0))
        start += n
    assert start == t.num_rows
    # every source row is used exactly once
    for src, (src_logits, _) in sources.items():
        used = np.sort(np.concatenate([idx for _, s, idx in rows if s == src]))
        assert np.array_equal(used, np.arange(len(src_logits))), f"{src}: rows missing or repeated"

    try:  # polars must see a fixed-size Array column
        import polars as pl

        df = pl.read_parquet(path)
        assert df.schema["logits"] == pl.Array(pl.Float32, K), df.schema
        assert np.array_equal(df["logits"].to_numpy().view(np.uint32), logits.view(np.uint32))
    except ImportError:
        pass
    return {"K": K, "stats": stats, "top_zero": top_zero}


def fmt_bytes(n: int) -> str:
    return f"{n / 1024 / 1024:.2f} MB" if n >= 1024 * 1024 else f"{n / 1024:.0f} kB"


def write_readme(out: Path, results: list[dict]) -> None:
    n_models = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                "nine", "ten"][len(results)] if len(results) <= 10 else str(len(results))
    lines = [
        "# Sample logits",
        "",
        f"Saved outputs of {n_models} real classifiers, for tests and examples. Made by "
        "`scripts/make_sample_logits.py` from the collection in `../shared/realdata/` "
        "(the script takes the realdata folder as an argument, default "
        "`../shared/realdata` relative to the repository root). Only data was "
        "copied; per-file provenance is in `../shared/realdata/README.md`.",
        "",
        "| file | kind | model | dataset | source repo @ commit | licence | N val / N test | K | acc val / test | why it is here |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["model"]
        assert "|" not in m["note"], "a '|' would break the Markdown table"
        (nv, av), (nt, at) = r["stats"]["val"], r["stats"]["test"]
        lines.append(
            f"| `{m['short']}.parquet` | `{m['kind']}` | {m['model_short']} | {m['dataset_short']} | "
            f"{m['repo']} @ {m['commit']} | {r['licence']} | {nv} / {nt} | {r['K']} | "
            f"{av:.2%} / {at:.2%} | {m['note']} |"
        )
    lines += [
        "",
        "Accuracy is `mean(argmax(logits) == label)`, measured on these files.",
        "",
        "## Kinds",
        "",
        "* `logits`: raw network outputs as saved by the source.",
        "* `logprob`: the source saved only softmax probabilities (float32); the "
        "`logits` column holds `log(p)` (computed in float64, cast to float32). "
        "These are logits only up to a per-row additive constant: softmax(log p) = p, "
        "so every softmax-based score and calibration metric is unchanged, but "
        "**raw-logit scores are meaningless on a `logprob` file** (max-logit is only "
        "the log of the saved top probability, and logit norms / pnorm, energy and the "
        "like measure nothing about the network). Because p was float32, the top class of very confident rows "
        "has log p = 0 exactly, so MSP ties at exactly 1.0 on those rows.",
        "",
    ]
    for r in results:
        if r["model"]["kind"] == "logprob":
            tz, st = r["top_zero"], r["stats"]
            lines.append(
                f"In `{r['model']['short']}.parquet` the top log-probability is exactly 0 on "
                f"{tz['val']} of {st['val'][0]} val rows and {tz['test']} of {st['test'][0]} "
                "test rows."
            )
            lines.append("")
    lines += [
        "## Layout",
        "",
        "One Parquet file per model (zstd), rows val first then test, each in source order:",
        "",
        "* `id` (string): source file and row index in it, e.g. `val/000017`, `test/004211`.",
        "* `split` (string): `val` or `test`.",
        "* `label` (int64).",
        "* `logits` (`fixed_size_list<float32>[K]`): the source float32 values, unchanged "
        "(checked bit for bit when the files are made); log-probabilities for a "
        "`logprob` file (see Kinds).",
        "",
        "Schema metadata: `selcal.source` (repo @ commit), `selcal.model`, `selcal.dataset`, "
        "`selcal.licence`, and also `selcal.source_path` and `selcal.split_method`.",
        "",
        "## Splits",
        "",
    ]
    kept = [r["model"]["short"] for r in results if r["split_kind"] == "kept"]
    resplit = [r for r in results if r["split_kind"] == "resplit"]
    if kept:
        lines.append(
            ", ".join(f"`{k}`" for k in kept)
            + (" keeps" if len(kept) == 1 else " keep")
            + " the val and test splits of the source, all rows."
        )
        lines.append("")
    for r in resplit:
        n = r["stats"]["val"][0] + r["stats"]["test"][0]
        nv, nt = r["stats"]["val"][0], r["stats"]["test"][0]
        lines.append(
            f"`{r['model']['short']}` comes with a test split only ({n:,} rows), so it was "
            f"split here: `numpy.random.default_rng({SPLIT_SEED}).permutation({n})`, the "
            f"first {nv:,} indices (sorted) are `val` and the other {nt:,} (sorted) are "
            "`test`. Its ids all start with `test/` because they name rows of the source "
            "test file."
        )
        lines.append("")
    lines += [
        "## Licences",
        "",
        "The data in every file is under a stated open licence:",
        "",
    ]
    seen = set()
    for r in results:  # one bullet per distinct licence note (the calibrator_* pair shares one)
        m = r["model"]
        if m["licence_note"] in seen:
            continue
        seen.add(m["licence_note"])
        same = [x["model"]["short"] for x in results if x["model"]["licence_note"] == m["licence_note"]]
        lines.append("* " + ", ".join(f"`{x}`" for x in same) + ": " + m["licence_note"])
    lines.append("")
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("realdata", nargs="?", type=Path, default=DEFAULT_REALDATA,
                    help="folder of the realdata collection (default: ../shared/realdata "
                    "relative to the repository root)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="output folder (default: sample_logits/ in the repository root)")
    args = ap.parse_args(argv)
    realdata, out = args.realdata.resolve(), args.out.resolve()
    manifest = load_manifest(realdata)
    out.mkdir(parents=True, exist_ok=True)

    results, total = [], 0
    for m in MODELS:
        short = m["short"]
        rows, sources, split_method = build_rows(realdata, short)
        mrec = {s: manifest[(short, s)] for s in sources}
        rec = next(iter(mrec.values()))
        if rec["source"] != m["repo"]:
            raise ValueError(f"{short}: manifest source {rec['source']!r} != {m['repo']!r}")
        for s, r in mrec.items():  # `kind` agrees with the manifest
            is_logprob = r["kind"].startswith("log of saved")
            if is_logprob != (m["kind"] == "logprob"):
                raise ValueError(f"{short}/{s}: kind {m['kind']!r} but manifest says {r['kind']!r}")
        for s, (lg, lb) in sources.items():  # source arrays agree with the manifest
            assert mrec[s]["N"] == len(lb) and mrec[s]["K"] == lg.shape[1], (short, s)
            assert abs(mrec[s]["acc"] - accuracy(lg, lb)) < 1e-12, (short, s)
        metadata = {
            "selcal.source": f"{m['repo']} @ {m['commit']}",
            "selcal.model": rec["model"],
            "selcal.dataset": rec["dataset"],
            "selcal.licence": rec["license"],
            "selcal.source_path": " | ".join(
                f"{s}: {mrec[s]['path']}" for s in sources
            ) if len({r['path'] for r in mrec.values()}) > 1 else rec["path"],
            "selcal.split_method": split_method,
        }
        table = make_table(rows, sources, metadata)
        path = out / f"{short}.parquet"
        pq.write_table(table, path, compression="zstd")
        res = verify(path, rows, sources, metadata)
        size = path.stat().st_size
        total += size
        results.append({"model": m, "licence": rec["license"], "size": size,
                        "split_kind": "kept" if set(sources) == {"val", "test"} else "resplit",
                        **res})
        split_txt = "  ".join(f"{s}: N={n} acc={a:.4f}" for s, (n, a) in res["stats"].items())
        if m["kind"] == "logprob":
            split_txt += "  top==0: " + " ".join(f"{s}={c}" for s, c in res["top_zero"].items())
        print(f"{path.name:42s} {fmt_bytes(size):>9s}  K={res['K']:<3d} {split_txt}  [verified]")

    write_readme(out, results)
    print(f"total {fmt_bytes(total)} in {len(results)} files; README written to {out / 'README.md'}")
    if total >= MAX_TOTAL_BYTES:
        print(f"ERROR: total size {total} bytes is not under {MAX_TOTAL_BYTES}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
