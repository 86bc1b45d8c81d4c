"""Model names taken from file names that hold a backslash or glob characters (QA)."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import selcal


def _dump(path):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 3)).astype(np.float32)
    pq.write_table(pa.table({"logits": list(logits), "label": rng.integers(0, 3, 200)}), path)


def test_backslash_and_brackets_in_a_file_name_stay_in_the_model_name(tmp_path):
    (tmp_path / "runs").mkdir()
    odd = [tmp_path / "$x_y^z\\.parquet", tmp_path / "runs" / "resnet[v2].parquet",
           tmp_path / "runs" / "vit*.parquet"]
    for path in odd:
        _dump(path)
    result = selcal.evaluate([str(p) for p in odd], scores="msp")
    assert [m.name for m in result.models] == ["$x_y^z\\", "resnet[v2]", "vit*"]


def test_evaluate_arrays_says_labels_look_1_based_as_the_cli_does():
    import pytest
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 4))
    labels = logits.argmax(1) + 1  # 1 .. 4
    with pytest.raises(selcal.SelcalError, match="look 1-based"):
        selcal.evaluate_arrays(logits, labels)
    with pytest.raises(selcal.SelcalError, match=r"label 9 is outside 0 \.\. 3 \(pass ignore_label="):
        selcal.evaluate_arrays(logits, np.where(np.arange(300) == 5, 9, logits.argmax(1)))


def test_check_refuses_nan_and_infinity_metric_values(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path
    result = selcal.evaluate_arrays(np.random.default_rng(0).normal(size=(300, 3)),
                                    np.random.default_rng(1).integers(0, 3, 300), scores="msp")
    base = tmp_path / "base.json"
    base.write_text(result.to_json())
    for bad in (float("nan"), float("inf")):
        data = json.loads(result.to_json())
        data["models"][0]["scores"]["msp"]["aurc"] = bad
        current = tmp_path / "current.json"
        current.write_text(json.dumps(data))  # writes NaN / Infinity, which json.load accepts
        selcal_cli = str(Path(sys.executable).with_name("selcal"))
        run = subprocess.run([selcal_cli, "check", str(current), "--baseline", str(base),
                              "--metric", "msp.aurc"], capture_output=True, text=True)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "is not a number or null" in run.stderr and "Traceback" not in run.stderr


def test_a_transposed_segmentation_label_map_is_refused(tmp_path):
    from pathlib import Path
    import pytest
    source = Path(__file__).resolve().parents[1] / "sample_logits" / "seg_alpha0"
    for name in sorted(p.name for p in source.glob("*.npz"))[:4]:
        with np.load(source / name) as image:
            np.savez(tmp_path / name, logits=image["logits"], label=np.ascontiguousarray(image["label"].T))
    with pytest.raises(selcal.SelcalError, match="transposed"):
        selcal.evaluate(str(tmp_path), scores="msp")


def _selcal(*args):
    import subprocess
    import sys
    from pathlib import Path
    return subprocess.run([str(Path(sys.executable).with_name("selcal")), *map(str, args)],
                          capture_output=True, text=True)


def test_outputs_never_overwrite_a_sibling_labels_file_or_a_segmentation_image(tmp_path):
    from pathlib import Path
    rng = np.random.default_rng(0)
    np.save(tmp_path / "test_logits.npy", rng.normal(size=(200, 3)))
    np.save(tmp_path / "test_labels.npy", rng.integers(0, 3, 200))
    before = (tmp_path / "test_labels.npy").read_bytes()
    run = _selcal("evaluate", tmp_path / "test_logits.npy", "--scores", "msp", "-q", "--no-warnings",
                  "--json", tmp_path / "test_labels.npy")
    assert run.returncode == 2 and "never overwrites an input" in run.stderr, run.stderr
    assert (tmp_path / "test_labels.npy").read_bytes() == before

    source = Path(__file__).resolve().parents[1] / "sample_logits" / "seg_alpha0"
    seg = tmp_path / "seg"
    seg.mkdir()
    for name in sorted(p.name for p in source.glob("*.npz"))[:3]:
        (seg / name).write_bytes((source / name).read_bytes())
    image = sorted(seg.glob("*.npz"))[0]
    before = image.read_bytes()
    run = _selcal("pixels", seg, "--out", image, "-q")
    assert run.returncode == 2 and "never overwrites an input" in run.stderr, run.stderr
    assert image.read_bytes() == before
