"""Segmentation folders (one .npz per image): the label grid, the pixel draw, the split by image,
``selcal pixels``, and the equality of ``evaluate SEGDIR/`` with ``evaluate pixels.parquet``."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import SAMPLES, brute_force_rows, make_folder, one_error_line
from typer.testing import CliRunner

import selcal
from selcal.cli import app
from selcal.errors import SelcalError
from selcal.io import open_dump, read_dump
from selcal.io.segmentation import label_grid, sample_cells

runner = CliRunner()


def pixel_ids(folder, **settings):
    source = open_dump(str(folder), **settings)
    return np.concatenate([source.cell_ids(index, cells) for index, _, cells, _, _ in source.image_rows()])


# ----------------------------------------------------------------------------- the grid
@pytest.mark.parametrize("big,small", [((16, 24), (8, 12)), ((1024, 2048), (256, 512)), ((7, 5), (3, 2)),
                                       ((5, 5), (5, 5)), ((3, 4), (6, 9)), ((513, 1023), (65, 129))])
def test_label_grid_takes_the_label_at_the_cell_centre(big, small):
    label = np.arange(big[0] * big[1]).reshape(big)
    expected = np.array([[label[math.floor((i + 0.5) * big[0] / small[0]), math.floor((j + 0.5) * big[1] / small[1])]
                          for j in range(small[1])] for i in range(small[0])])
    assert np.array_equal(label_grid(label, *small), expected)


# ----------------------------------------------------------------------------- the draw
def test_every_labelled_pixel_with_p_0_equals_the_brute_force_rows(tmp_path):
    items = make_folder(tmp_path / "seg")
    logits, labels, ids = brute_force_rows(items)
    dump = read_dump(str(tmp_path / "seg"), pixels_per_image=0)
    assert np.array_equal(dump.logits, logits) and np.array_equal(dump.labels, labels)
    assert np.array_equal(pixel_ids(tmp_path / "seg", pixels_per_image=0), ids)
    reference = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp", "max_logit")))
    result = selcal.evaluate(str(tmp_path / "seg"), pixels_per_image=0, scores=("msp", "max_logit")).models[0]
    for name in ("msp", "max_logit"):
        assert result.scores[name] == reference.scores[name]
    assert (result.accuracy, result.nll, result.brier, result.cece) == \
        (reference.accuracy, reference.nll, reference.brier, reference.cece)


def test_drawn_pixels_are_the_same_for_two_models_and_never_void(tmp_path):
    items = make_folder(tmp_path / "a", seed=1)
    make_folder(tmp_path / "b", seed=2, dtype=np.float16)
    _, _, all_ids = brute_force_rows(items)
    for p in (1, 7, 40, 10_000):
        ids_a = pixel_ids(tmp_path / "a", pixels_per_image=p, seed=3)
        ids_b = pixel_ids(tmp_path / "b", pixels_per_image=p, seed=3)
        assert np.array_equal(ids_a, ids_b)
        assert set(ids_a) <= set(all_ids)  # labelled cells only
        labelled = {name: int(np.sum([i.startswith(name + "/") for i in all_ids])) for name, _, _ in items}
        for name, count in labelled.items():
            assert sum(i.startswith(name + "/") for i in ids_a) == min(p, count)


def test_the_draw_is_stable_across_runs_file_order_and_depends_on_the_seed(tmp_path):
    make_folder(tmp_path / "a")
    make_folder(tmp_path / "reversed", order=list(range(6))[::-1])
    first = pixel_ids(tmp_path / "a", pixels_per_image=10)
    assert np.array_equal(first, pixel_ids(tmp_path / "a", pixels_per_image=10))
    assert np.array_equal(first, pixel_ids(tmp_path / "reversed", pixels_per_image=10))
    assert not np.array_equal(first, pixel_ids(tmp_path / "a", pixels_per_image=10, seed=1))
    # pinned: the draw never changes between selcal versions without notice
    assert list(sample_cells("img000", np.ones((4, 4), dtype=bool), 3, 0)) == \
        list(sample_cells("img000", np.ones((4, 4), dtype=bool), 3, 0))


def test_smaller_draws_are_subsets_of_larger_ones(tmp_path):
    make_folder(tmp_path / "a")
    small, large = (set(pixel_ids(tmp_path / "a", pixels_per_image=p)) for p in (5, 30))
    assert small < large


def test_images_of_other_sizes_and_equal_sizes(tmp_path):
    sizes = [(8, 12, 16, 24), (5, 5, 5, 5), (3, 7, 12, 28)]
    items = make_folder(tmp_path / "a", n=3, sizes=sizes)
    logits, labels, ids = brute_force_rows(items)
    dump = read_dump(str(tmp_path / "a"), pixels_per_image=0)
    assert np.array_equal(dump.logits, logits) and np.array_equal(dump.labels, labels)


# ----------------------------------------------------------------- folder == pixel dump
def _json_without_paths(path):
    data = json.loads(open(path).read())
    for model in data["models"]:
        model.pop("path")
        model.pop("name")
        model.pop("fingerprint")  # a folder's pixels have no ids; its pixel dump's have (image/row/col)
    return data


@pytest.mark.parametrize("extra", [[], ["--pixels-per-image", "0"], ["--seed", "5", "--val-fraction", "0.4"],
                                   ["--scores", "msp,max_logit"], ["--bootstrap", "30"],
                                   ["--bootstrap", "4", "--bootstrap-refit", "--pixels-per-image", "40"]])
def test_evaluate_folder_equals_evaluate_of_its_pixel_dump(tmp_path, extra):
    make_folder(tmp_path / "seg", n=8, h=16, w=16, big_h=32, big_w=32)
    draw = [a for a in extra if a != "--scores" and a != "msp,max_logit"]
    draw = [v for i, v in enumerate(draw) if v in ("--pixels-per-image", "--seed") or
            (i and draw[i - 1] in ("--pixels-per-image", "--seed"))]
    result = runner.invoke(app, ["pixels", str(tmp_path / "seg"), "--out", str(tmp_path / "seg.parquet"), "-q", *draw])
    assert result.exit_code == 0, result.output
    for source, out in ((tmp_path / "seg", "folder.json"), (tmp_path / "seg.parquet", "pixels.json")):
        result = runner.invoke(app, ["evaluate", str(source), "--json", str(tmp_path / out), "-q", *extra])
        assert result.exit_code == 0, result.output
    folder, pixels = _json_without_paths(tmp_path / "folder.json"), _json_without_paths(tmp_path / "pixels.json")
    assert folder == pixels
    texts = [json.dumps({**data, "models": [{k: v for k, v in m.items() if k != "fingerprint"}
                                            for m in data["models"]]}, indent=2)
             for data in (json.loads((tmp_path / name).read_text()) for name in ("folder.json", "pixels.json"))]
    assert texts[0].replace(str(tmp_path / "seg"), "X") == texts[1].replace(str(tmp_path / "seg.parquet"), "X")


def test_streamed_folder_gives_the_same_numbers(tmp_path):
    make_folder(tmp_path / "seg", n=8)
    whole = selcal.evaluate(str(tmp_path / "seg"), pixels_per_image=20).to_json()
    streamed = selcal.evaluate(str(tmp_path / "seg"), pixels_per_image=20, stream=True).to_json()
    assert whole == streamed


def test_pixel_dump_columns(tmp_path):
    items = make_folder(tmp_path / "seg", n=3)
    result = runner.invoke(app, ["pixels", str(tmp_path / "seg"), "--out", str(tmp_path / "px.parquet"),
                                 "--pixels-per-image", "0"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "px.parquet")
    logits, labels, ids = brute_force_rows(items)
    assert table.column("id").to_pylist() == ids.tolist()
    assert table.column("image").to_pylist() == [i.split("/")[0] for i in ids]
    assert np.array_equal(np.stack(table.column("logits").to_numpy(zero_copy_only=False)), logits)
    assert table.column("label").to_pylist() == labels.tolist()
    meta = json.loads(table.schema.metadata[b"selcal.pixels"])
    assert meta["images"] == 3 and meta["pixels"] == len(ids) and meta["ignore_label"] == 255


# ----------------------------------------------------------------------------- the split
def test_the_holdout_takes_whole_images_independent_of_file_order(tmp_path):
    make_folder(tmp_path / "a", n=10)
    make_folder(tmp_path / "reversed", n=10, order=list(range(10))[::-1])
    dumps = [read_dump(str(tmp_path / f), pixels_per_image=15) for f in ("a", "reversed")]
    options = selcal.Options(val_fraction=0.3)
    splits = [selcal.evaluate.__globals__["split_rows"](d, None, options) for d in dumps]
    for val_rows, eval_rows, rule in splits:
        assert rule == "image-holdout"
        val_images, eval_images = set(val_rows.images.tolist()), set(eval_rows.images.tolist())
        assert len(val_images) == 3 and len(eval_images) == 7 and not val_images & eval_images
    assert np.array_equal(splits[0][0].logits, splits[1][0].logits)
    model = selcal.evaluate(str(tmp_path / "a"), pixels_per_image=15, val_fraction=0.3).models[0]
    pixels = model.extra["pixels"]
    assert (pixels["val_images"], pixels["eval_images"]) == (3, 7)
    assert pixels["val_pixels"] == model.n_val and pixels["eval_pixels"] == model.n_eval
    assert model.split == "image-holdout"


def test_val_folder(tmp_path):
    make_folder(tmp_path / "test", n=4, seed=1)
    make_folder(tmp_path / "val", n=3, seed=2, label_seed=7)
    result = runner.invoke(app, ["evaluate", str(tmp_path / "test"), "--val", str(tmp_path / "val"),
                                 "--json", str(tmp_path / "out.json"), "-q", "--pixels-per-image", "20"])
    assert result.exit_code == 0, result.output
    model = json.loads((tmp_path / "out.json").read_text())["models"][0]
    assert model["split"] == "val-file" and model["n_val"] == 60 and model["n_eval"] == 80
    assert model["pixels"]["val_images"] == 3 and model["pixels"]["eval_images"] == 4


@pytest.mark.slow
def test_compare_two_folders_resamples_images_as_their_pixel_dumps_do(tmp_path):
    make_folder(tmp_path / "a", n=10, seed=1)
    make_folder(tmp_path / "b", n=10, seed=2)
    reports = []
    for first, second in ((tmp_path / "a", tmp_path / "b"), (tmp_path / "a.parquet", tmp_path / "b.parquet")):
        if first.suffix:
            for folder in ("a", "b"):
                assert runner.invoke(app, ["pixels", str(tmp_path / folder), "--out",
                                           str(tmp_path / f"{folder}.parquet"), "-q"]).exit_code == 0
        out = tmp_path / f"compare{len(reports)}.json"
        result = runner.invoke(app, ["compare", str(first), str(second), "--bootstrap", "40", "-q",
                                     "--json", str(out)])
        assert result.exit_code in (0, 1), result.output
        reports.append(out.read_text().replace(".parquet", ""))
    assert reports[0] == reports[1]
    assert "resamples of the same 8 images" in reports[0]
    result = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--bootstrap", "10", "-q",
                                 "--pixels-per-image", "7", "--json", str(tmp_path / "few.json")])
    assert result.exit_code in (0, 1), result.output
    assert "resamples of the same 8 images (56 evaluation pixels" in (tmp_path / "few.json").read_text()


# ----------------------------------------------------------------------------- bad input
def _error(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selcal: error: "), result.output
    return lines[0]


@pytest.mark.parametrize("break_it,expected", [
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((1, 4, 8, 12), np.float32),
                        label=np.zeros((16, 24), np.uint8)), "img001.npz: column 'logits': has shape (1, 4, 8, 12)"),
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((3, 8, 12), np.float32),
                        label=np.zeros((16, 24), np.uint8)), "has K = 3 classes but img000.npz has K = 4"),
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((4, 8, 12), np.int32),
                        label=np.zeros((16, 24), np.uint8)), "has dtype int32; logits must be float16, float32 or "
                                                             "float64: cast integer logits to float (quantised"),
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((4, 8, 12), np.float32),
                        label=np.zeros((16, 24), np.float32)), "labels must be integers"),
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((4, 8, 12), np.float32),
                        label=np.full((16, 24), 7, np.uint8)), "logit cell (0, 0) has label 7, outside 0 .. 3"),
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((4, 8, 12), np.float32)), "no array named 'label'"),
    (lambda f: np.savez(f / "img001.npz", label=np.zeros((16, 24), np.uint8)), "no array named 'logits'"),
    (lambda f: (f / "img001.npz").write_bytes(b"PK\x03\x04 truncated"), "img001.npz: not a readable .npz file"),
    (lambda f: np.savez(f / "img001.npz", logits=np.full((4, 8, 12), np.nan, np.float32),
                        label=np.zeros((16, 24), np.uint8)), "logit cell (0, 0) holds NaN"),
    (lambda f: np.savez(f / "img001.npz", logits=np.zeros((4, 8, 12), np.float32),
                        label=np.zeros((16,), np.uint8)), "expected the label map H x W"),
])
def test_bad_images_are_refused_in_one_line_without_output(tmp_path, break_it, expected):
    make_folder(tmp_path / "seg", n=3)
    break_it(tmp_path / "seg")
    for args in (["evaluate", str(tmp_path / "seg")],
                 ["pixels", str(tmp_path / "seg"), "--out", str(tmp_path / "px.parquet")]):
        assert expected in _error(args)
    assert os.listdir(tmp_path) == ["seg"]


def test_bad_settings(tmp_path):
    make_folder(tmp_path / "seg", n=3)
    assert "--pixels-per-image must be 0" in _error(["evaluate", str(tmp_path / "seg"), "--pixels-per-image", "-1"])
    assert "only the group 'image'" in _error(["evaluate", str(tmp_path / "seg"), "--group-col", "city"])
    assert "folder of per-image .npz files" in _error(["pixels", str(tmp_path), "--out", str(tmp_path / "x.parquet")])
    assert "leaves no validation or no evaluation images" in _error(
        ["evaluate", str(tmp_path / "seg"), "--val-fraction", "0.1"])
    every_pixel_void = tmp_path / "void"
    make_folder(every_pixel_void, n=2, void=1.0)
    assert "nothing to evaluate" in _error(["evaluate", str(every_pixel_void), "--scores", "msp"])


def test_group_by_image(tmp_path):
    make_folder(tmp_path / "seg", n=3)
    model = selcal.evaluate(str(tmp_path / "seg"), group_col="image", scores=("msp",), pixels_per_image=10).models[0]
    assert sorted(model.extra["groups"]) == ["img000", "img001", "img002"]
    assert all(g["n_eval"] == 10 for g in model.extra["groups"].values())


# ----------------------------------------------------------------------- cluster bootstrap
def test_resamples_of_other_sizes_equal_the_plain_metrics_on_the_repeated_rows():
    """A cluster resample holds another number of rows than the data: every metric uses its own total."""
    from helpers import plain_metrics, tied_data

    from selcal.bootstrap import draw_cluster_counts
    from selcal.bootstrap.vectorised import Prepared

    rng = np.random.default_rng(4)
    for n, bins in ((200, 15), (30, 4), (9, 15)):
        data = tied_data(n, rng, levels=3, bins=bins)
        clusters = np.sort(rng.integers(0, 6, size=n))
        data.clusters = clusters
        for counts in draw_cluster_counts(clusters, 5, seed=n):
            got = Prepared(data).metrics_of_counts(counts)
            for i, row_counts in enumerate(counts):
                for c in np.unique(clusters):  # whole clusters drawn
                    assert len(set(row_counts[clusters == c].tolist())) == 1
                want = plain_metrics(data, np.repeat(np.arange(n), row_counts))
                for level in want:
                    for key, value in want[level].items():
                        value = math.nan if value is None else value
                        if math.isnan(value):
                            assert math.isnan(got[level][key][i])
                        else:
                            assert got[level][key][i] == pytest.approx(value, abs=1e-9, rel=0), (level, key)


def test_bootstrap_of_pixel_rows_resamples_images(tmp_path):
    make_folder(tmp_path / "a", n=12)
    make_folder(tmp_path / "reversed", n=12, order=list(range(12))[::-1])
    from selcal.bootstrap import add_intervals

    results = [add_intervals(selcal.evaluate(str(tmp_path / f), pixels_per_image=30), resamples=50, seed=1)
               for f in ("a", "reversed")]
    model = results[0].models[0]
    assert model.extra["ci_resampled"] == "images"
    assert [m.to_dict() | {"path": None, "name": None} for m in results[0].models] == \
        [m.to_dict() | {"path": None, "name": None} for m in results[1].models]
    # the same rows without their images: the ordinary row bootstrap gives other intervals
    model.clusters = None
    rows = add_intervals(type(results[0])(models=[model], options=results[0].options), resamples=50, seed=1)
    assert rows.models[0].scores["msp"]["ci"] != results[1].models[0].scores["msp"]["ci"]


@pytest.mark.slow
def test_refit_bootstrap_of_pixel_rows_redraws_images_and_ignores_file_order(tmp_path):
    make_folder(tmp_path / "a", n=10)
    make_folder(tmp_path / "reversed", n=10, order=list(range(10))[::-1])
    runs = [selcal.evaluate(str(tmp_path / f), pixels_per_image=20, bootstrap=6, bootstrap_refit=True).models[0]
            for f in ("a", "reversed")]
    assert runs[0].scores["temp"]["ci"] == runs[1].scores["temp"]["ci"]
    low, high = runs[0].scores["temp"]["ci"]["temperature"]
    assert low < high and runs[0].extra["ci_resampled"] == "images"


def test_cluster_intervals_are_wider_when_pixels_of_an_image_agree(tmp_path):
    """Images that are wholly right or wholly wrong: the image bootstrap sees 12 samples, not 12 x 40."""
    folder = tmp_path / "seg"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(12):
        label = np.zeros((8, 8), np.uint8)
        logits = rng.normal(size=(3, 8, 8)).astype(np.float32)
        logits[0 if i % 3 else 1] += 4  # every third image wrong everywhere
        np.savez(folder / f"im{i:02d}.npz", logits=logits, label=label)
    from selcal.bootstrap import add_intervals

    result = selcal.evaluate(str(folder), pixels_per_image=40, scores=("msp",))
    low, high = add_intervals(result, resamples=200, seed=0).models[0].extra["ci"]["accuracy"]
    result.models[0].clusters = None
    row_low, row_high = add_intervals(result, resamples=200, seed=0).models[0].extra["ci"]["accuracy"]
    assert high - low > 3 * (row_high - row_low)


# ----------------------------------------------------------------------------- rank maps
def test_rank_map_ranks_every_cell_among_the_evaluated_pixels():
    from selcal.figures.segmentation import rank_map_data

    rng = np.random.default_rng(0)
    evaluated = np.round(rng.random(200), 1)  # many ties
    values = np.round(rng.random((5, 7)), 1)
    grid = rng.integers(0, 3, (5, 7))
    grid[0, 0] = 255
    predictions = rng.integers(0, 3, (5, 7))
    panel = rank_map_data("x", "msp", values, predictions, grid, 255, evaluated)
    for i in range(5):
        for j in range(7):
            if (i, j) == (0, 0):
                assert np.isnan(panel.rank[i, j]) and panel.void[i, j] and not panel.error[i, j]
                continue
            below = sum(e < values[i, j] for e in evaluated)
            equal = sum(e == values[i, j] for e in evaluated)
            assert panel.rank[i, j] == pytest.approx((below + equal / 2) / 200, abs=1e-15)
            assert panel.error[i, j] == (predictions[i, j] != grid[i, j])


def test_cell_scores_are_the_evaluated_scores_of_those_pixels(tmp_path):
    from selcal.figures.segmentation import cell_scores
    from selcal.io.segmentation import read_image

    make_folder(tmp_path / "seg", n=8, dtype=np.float16)
    model = selcal.evaluate(str(tmp_path / "seg"), pixels_per_image=0).models[0]
    names = model.cluster_names
    for index in np.unique(model.clusters)[:2]:
        logits, grid = read_image(tmp_path / "seg" / f"{names[index]}.npz")
        k = logits.shape[0]
        cells = logits.reshape(k, -1).T[(grid != 255).ravel()]
        values = cell_scores(cells, model)
        assert set(values) == {"msp", "max_logit", "pnorm", "temp"}
        for name, v in values.items():
            assert np.array_equal(v, model.score_values[name][model.clusters == index]), name


def test_images_with_the_most_confident_errors_are_chosen():
    from types import SimpleNamespace

    from selcal.figures.segmentation import choose_images

    rng = np.random.default_rng(1)
    clusters = rng.integers(0, 6, 500)
    values = rng.random(500)
    correct = rng.random(500) < 0.6
    model = SimpleNamespace(score_values={"msp": values}, rows=SimpleNamespace(correct=correct), clusters=clusters,
                            cluster_names=np.array([f"i{c}" for c in range(6)]))
    top = np.sort(values)[::-1][:50].min()
    tally = [int(np.sum((values >= top) & ~correct & (clusters == c))) for c in range(6)]
    expected = sorted(range(6), key=lambda c: (-tally[c], c))[:3]
    assert choose_images([model], 3) == expected


@pytest.mark.slow
def test_plots_add_rank_maps_of_chosen_or_named_images(tmp_path):
    from selcal.figures.segmentation import write_rank_maps

    for name, seed in (("a", 1), ("b", 2)):
        make_folder(tmp_path / name, n=5, seed=seed)
        os.rename(tmp_path / name / "img003.npz", tmp_path / name / "$\\frac{x$.npz")  # never mathtext
    result = runner.invoke(app, ["evaluate", str(tmp_path / "a"), "--plots", str(tmp_path / "plots"),
                                 "--rank-maps-of", "$\\frac{x$,img000", "-q", "--scores", "msp"])
    assert result.exit_code == 0, result.output
    files = os.listdir(tmp_path / "plots")
    assert sorted(p for p in files if p.startswith("rank_map")) == ["rank_map_frac_x.png", "rank_map_img000.png"]
    assert {"a_rc.png", "a_reliability.png", "a_vmax_msp.png"} <= set(files)  # the usual figures of pixel rows
    both = selcal.evaluate([str(tmp_path / "a"), str(tmp_path / "b")], scores=("msp", "max_logit"))
    assert len(write_rank_maps(both, tmp_path / "p2", count=2)) == 2
    assert write_rank_maps(both, tmp_path / "p3", count=0) == []
    with pytest.raises(SelcalError, match="no evaluated image 'nope'"):
        write_rank_maps(both, tmp_path / "p4", images=["nope"])


# ---------------------------------------------------------------------- the sample pair
# folder: (n_eval, eval images, pixel accuracy, msp AURC) with the default settings
PINNED_PAIR = {"seg_alpha0": (22700, 48, 0.9220704845814978, 0.014760112748740438),
               "seg_alpha0.1": (22700, 48, 0.918237885462555, 0.01809115673035809)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PINNED_PAIR))
def test_sample_segmentation_pair(name):
    folder = os.path.join(str(SAMPLES), name)
    model = selcal.evaluate(folder).models[0]
    n_eval, images, accuracy, aurc = PINNED_PAIR[name]
    assert (model.n_eval, model.extra["pixels"]["eval_images"]) == (n_eval, images)
    assert model.accuracy == pytest.approx(accuracy, abs=1e-15)
    assert model.scores["msp"]["aurc"] == pytest.approx(aurc, abs=1e-15)
    # independently: every labelled pixel, flattened by a loop, gives the folder's P = 0 numbers
    items = []
    for file in sorted(os.listdir(folder)):
        with np.load(os.path.join(folder, file)) as archive:
            items.append((file[:-4], archive["logits"], archive["label"]))
    logits, labels, _ = brute_force_rows(items)
    reference = selcal.evaluate_arrays(logits, labels, options=selcal.Options(scores=("msp",)))
    every = selcal.evaluate(folder, pixels_per_image=0, scores=("msp",)).models[0]
    assert every.scores["msp"] == reference.scores["msp"] and every.accuracy == reference.accuracy


def test_only_regular_visible_npz_files_are_images(tmp_path):
    make_folder(tmp_path / "seg", n=5)
    (tmp_path / "seg" / ".hidden.npz").write_bytes(b"junk")
    (tmp_path / "seg" / "folder.npz").mkdir()
    (tmp_path / "seg" / "README.txt").write_text("scenes")
    os.rename(tmp_path / "seg" / "img002.npz", tmp_path / "seg" / "img002.NPZ")
    source = open_dump(str(tmp_path / "seg"))
    assert list(source.images) == [f"img{i:03d}" for i in range(5)]
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / ".x.npz").write_bytes(b"junk")
    assert _error(["evaluate", str(tmp_path / "hidden")]).startswith("selcal: error: ")


def test_reading_a_folder_reports_progress_image_by_image(tmp_path):
    make_folder(tmp_path / "seg", n=5)
    calls = []
    selcal.evaluate(str(tmp_path / "seg"), pixels_per_image=10, scores=("msp",),
                    progress=lambda done, total: calls.append((done, total)))
    reading = calls[:5]
    assert [done for done, _ in reading] == [10, 20, 30, 40, 50] and all(total == 50 for _, total in reading)


def test_a_transposed_segmentation_label_map_is_refused(tmp_path):
    import pytest
    source = SAMPLES / "seg_alpha0"
    for name in sorted(p.name for p in source.glob("*.npz"))[:4]:
        with np.load(source / name) as image:
            np.savez(tmp_path / name, logits=image["logits"], label=np.ascontiguousarray(image["label"].T))
    with pytest.raises(selcal.SelcalError, match="transposed"):
        selcal.evaluate(str(tmp_path), scores="msp")


@pytest.mark.parametrize("label_shape", [(64, 100), (4, 8), (20, 40)])
def test_a_label_map_not_an_integer_multiple_of_the_logits_is_refused(tmp_path, cli, label_shape):
    folder = tmp_path / "seg"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for index in range(3):
        shape = label_shape if index == 1 else (32, 64)
        np.savez(folder / f"img{index}.npz", logits=rng.normal(size=(3, 16, 32)).astype(np.float32),
                 label=rng.integers(0, 3, size=shape))
    line = one_error_line(cli("evaluate", folder, "--scores", "msp"))
    assert "img1.npz" in line and "integer multiple" in line
