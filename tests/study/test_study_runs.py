"""A run's recipe, seed and data set: from a path template or a manifest, and the refusals."""

from __future__ import annotations

import pytest

from selcal.errors import SelcalError
from selcal.study.runs import compile_pattern, runs_from_manifest, runs_from_pattern

PATTERN = "{dataset}/{recipe}_seed{seed}.parquet"


def test_fields_are_read_from_the_path_and_the_runs_ordered():
    runs = runs_from_pattern(["x/c100/ls_0.1_seed2.parquet", "x/c10/ce_seed10.parquet", "x/c10/ce_seed9.parquet"],
                             PATTERN)
    assert [(r.dataset, r.recipe, r.seed) for r in runs] == [("c10", "ce", 9), ("c10", "ce", 10), ("c100", "ls_0.1", 2)]
    assert all(isinstance(r.seed, int) for r in runs)


def test_a_template_matches_the_whole_path_or_its_end_after_a_slash():
    regex, _ = compile_pattern("{recipe}_seed{seed}.pt")
    assert regex.match("ce_seed1.pt") and regex.match("/abs/runs/ce_seed1.pt")
    assert regex.match("xce_seed1.pt").group("recipe") == "xce"  # the whole name, not a piece of it
    assert regex.match("runs/ce_seed1.pt.bak") is None


def test_a_wildcard_and_extra_fields():
    runs = runs_from_pattern(["r/resnet18/ce-s1-final.npz", "r/vit/ce-s2-old.npz"], "{arch}/{recipe}-s{seed}-*.npz")
    assert [(r.recipe, r.seed, r.fields) for r in runs] == [("ce", 1, {"arch": "resnet18"}), ("ce", 2, {"arch": "vit"})]
    assert runs[0].dataset is None


def test_an_extra_field_does_not_tell_two_runs_apart():
    with pytest.raises(SelcalError, match="is the same run as"):
        runs_from_pattern(["r/resnet18/ce-s1.npz", "r/vit/ce-s1.npz"], "{arch}/{recipe}-s{seed}.npz")


def test_fields_never_cross_a_slash():
    with pytest.raises(SelcalError, match="does not match the template"):
        runs_from_pattern(["a/b/ce_seed1.parquet"], "{recipe}/ce_seed{seed}.parquet.x")
    regex, _ = compile_pattern("{dataset}_{recipe}_{seed}.pt")
    assert regex.match("runs/c10_ce_1.pt").groupdict() == {"dataset": "c10", "recipe": "ce", "seed": "1"}


@pytest.mark.parametrize("paths, pattern, message", [
    (["c10/ce_seed1.parquet", "c10/other.parquet"], PATTERN, "c10/other.parquet: does not match the template"),
    (["c10/ce_seed1.parquet", "c10/ce_seed01.parquet"], PATTERN, "is the same run as c10/ce_seed1.parquet"),
    (["c10/ce_seed1.parquet", "c10/ce_seedA.parquet"], PATTERN, "seed 'A' is text but"),
    (["c10/ce_seed1.parquet"], "{dataset}/{recipe}.parquet", "has no {seed} field"),
    (["c10/ce_seed1.parquet"], "{dataset}/{recipe}_seed{seed}{seed}", "appears twice"),
    (["c10/ce_seed1.parquet"], "{data set}/{recipe}_{seed}", "is not a field name"),
    (["c10/ce_seed1.parquet"], "{recipe}_seed{seed}}", "a brace that opens or closes no field"),
    ([], PATTERN, "no run given"),
])
def test_bad_templates_and_runs_are_refused_in_one_line(paths, pattern, message):
    with pytest.raises(SelcalError, match=".*") as caught:
        runs_from_pattern(paths, pattern)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_text_seeds_are_kept_as_text():
    runs = runs_from_pattern(["ce_seedb.pt", "ce_seeda.pt"], "{recipe}_seed{seed}.pt")
    assert [r.seed for r in runs] == ["a", "b"]


def test_a_manifest_with_data_sets_extra_columns_and_relative_paths(tmp_path):
    (tmp_path / "m.csv").write_text("path,recipe,seed,dataset,arch\nruns/a.parquet,ce,1,c10,r18\n"
                                    "/abs/b.parquet,ls,2,c10,r18\n")
    runs = runs_from_manifest(tmp_path / "m.csv")
    assert [(r.path, r.recipe, r.seed, r.dataset, r.fields) for r in runs] == [
        (str(tmp_path / "runs/a.parquet"), "ce", 1, "c10", {"arch": "r18"}),
        ("/abs/b.parquet", "ls", 2, "c10", {"arch": "r18"})]


@pytest.mark.parametrize("text, message", [
    ("path,recipe\na,ce\n", "has no column seed"),
    ("path,recipe,seed\n", "has a header but no run"),
    ("", "is empty"),
    ("path,recipe,seed\na,ce,1\nb,ce,1\n", "is the same run as"),
    ("path,recipe,seed\na,,1\n", "line 2, column 'recipe' is empty"),
    ("path,recipe,seed\na,ce\n", "line 2 has 2 cells but the header has 3"),
    ("path,recipe,seed,seed\na,ce,1,2\n", "the column 'seed' appears twice"),
])
def test_bad_manifests_are_refused_in_one_line(tmp_path, text, message):
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(SelcalError) as caught:
        runs_from_manifest(tmp_path / "m.csv")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_manifest(tmp_path):
    with pytest.raises(SelcalError, match="no such file; manifest takes a CSV"):
        runs_from_manifest(tmp_path / "none.csv")
