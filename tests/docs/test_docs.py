"""The documentation cannot go stale: every command, option, score and metric has its place in the
generated references, the generated pages are those the code makes now, every command output shown in
the README and on the site's home page is the real output, and the README stays a front door."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
QUICK_START = ["evaluate", "sample_logits/calibrator_cifar10_resnet50_ce.parquet"]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return _generator().pages()


def test_the_generated_reference_pages_are_the_ones_the_code_makes_now(generated):
    stale = [p for p, text in generated.items()
             if not (DOCS / "reference" / p).is_file() or (DOCS / "reference" / p).read_text() != text]
    assert not stale, f"run python docs/generate.py: {stale}"


def test_every_command_and_every_option_is_in_the_cli_reference(generated):
    from selcal.cli import app

    text = generated["cli.md"]
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert f"## selcal {name}\n" in text, name
        section = text.split(f"## selcal {name}\n")[1].split("\n## selcal ")[0]
        for param in command.params:
            if getattr(param, "hidden", False) or param.param_type_name == "argument":
                continue
            for option in param.opts:
                assert f"`{option}`" in section, (name, option)


def test_every_score_has_a_page_with_its_definition(generated):
    from selcal.scores import REGISTRY

    for name in REGISTRY:
        page = generated[f"scores/{name}.md"]
        assert "## Definition" in page, f"docs/CONVENTIONS.md defines no score `{name}`"
        assert f"[`{name}`]({name}.md)" in generated["scores/index.md"]


def test_every_metric_has_a_page_with_its_definition_direction_and_unit(generated):
    from selcal.metrics.catalog import CATALOG

    index = generated["metrics/index.md"]
    for key in CATALOG:
        page = next(text for path, text in generated.items()
                    if path.startswith("metrics/") and text.startswith(f"# `{key}`"))
        assert "## Definition" in page, f"docs/CONVENTIONS.md defines no metric `{key}`"
        assert "| direction |" in page and "| unit |" in page and "| options that change it |" in page
        assert f"[`{key}`]" in index


def test_a_missing_definition_is_noticed():
    assert _generator().definition("no_such_metric") is None
    assert "(1/N)" in _generator().definition("aurc")
    assert "1 - accuracy" in _generator().definition("error")


@pytest.mark.slow
def test_every_command_output_shown_is_the_real_output():
    """README.md and every docs page: each ``<!-- output: selcal ... -->`` block is what the command prints."""
    stale = [str(path.relative_to(ROOT)) for path, text in _generator().shown_outputs().items()
             if path.read_text(encoding="utf-8") != text]
    assert not stale, f"run python docs/generate.py: {stale}"


def test_the_quick_start_is_shown_with_its_output_in_the_readme_and_on_the_home_page():
    for page in ("README.md", "docs/index.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert f"<!-- output: selcal {' '.join(QUICK_START)} -->" in text, page


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "../shared" not in text and "/work/" not in text
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which is not in the repository"
    assert "pip install ." in text
    pinned = re.findall(r"git\+https://[^\s\"']+@v(\d+\.\d+\.\d+)", text)
    from selcal import __version__

    assert pinned == [__version__], "the README installs from a git URL pinned to this release's tag"


def test_the_readme_python_snippet_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["result"].models


def test_every_guide_is_in_the_sites_navigation_and_every_entry_exists():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    entries = re.findall(r":\s+([\w./-]+\.md)\s*$", config, re.M)
    for entry in entries:
        assert (DOCS / entry).is_file(), f"mkdocs.yml names {entry}, which does not exist"
    for guide in sorted((DOCS / "guides").glob("*.md")):
        assert f"guides/{guide.name}" in entries, f"docs/guides/{guide.name} is not in mkdocs.yml's nav"
    stylesheets = re.findall(r"^\s+-\s+([\w./-]+\.css)\s*$", config, re.M)
    assert "stylesheets/extra.css" in stylesheets  # the wider grid: 100-column outputs fit from 1400 px
    for sheet in stylesheets:
        assert (DOCS / sheet).is_file(), f"mkdocs.yml's extra_css names {sheet}, which does not exist"


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                           "PATH": "/usr/bin:/bin",
                                                                           "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_ci_job_of_the_guide_installs_selcal_pinned_and_uses_only_existing_options(cli):
    text = (DOCS / "guides" / "compare-and-gate.md").read_text(encoding="utf-8")
    job = text[text.index("# .github/workflows/selcal.yml"):]
    job = job[:job.index("```")]
    assert re.search(r"git\+https://\S+@v\d+\.\d+\.\d+", job), "the job installs selcal pinned to a tag"
    commands = re.findall(r"selcal (evaluate|check|compare) ((?:[^\n]|\\\n)+)", job.replace("\\\n", " "))
    assert {c for c, _ in commands} >= {"evaluate", "check"}
    for command, args in commands:
        help_text = cli(command, "--help", terminal_width=200).stdout
        for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", args):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", help_text), (command, flag)


def test_the_docs_use_only_files_of_the_repository():
    """No example depends on a folder outside the clone (../shared was the team's data)."""
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text and "/work/shared" not in text, page
    text = "".join(p.read_text(encoding="utf-8") for p in (DOCS / "guides").glob("*.md"))
    for path in ("sample_logits/hollance_timm_resnet34.npz", "sample_logits/lm_eval/synthetic__llm-large/"
                 "samples_mmlu_synth_2026-11-25T14-00-00.000000.jsonl"):
        assert path in text and (ROOT / path).exists()


def test_the_cli_guides_table_of_evaluates_panels_is_the_live_help():
    """docs/guides/cli.md lists each panel of ``selcal evaluate --help`` with its options: every option,
    in its panel, in the help's order (it had missed the options added since it was written)."""
    from selcal.cli.groups import panel_of

    text = (DOCS / "guides" / "cli.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| ([A-Z][\w ]+) \| (.*) \|$", text, re.M))
    command = typer.main.get_command(__import__("selcal.cli", fromlist=["app"]).app).commands["evaluate"]
    live: dict[str, list[str]] = {}
    for param in command.params:
        if param.param_type_name == "option":
            live.setdefault(panel_of("evaluate", param.name)[1], []).append(
                next(o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")))
    live.setdefault("Run", []).append("-h")
    for title, options in live.items():
        shown = re.findall(r"`(--?[\w-]+)`", rows.get(title, ""))
        listed = [o for o in shown if o in options or o in ("-q", "-h")]
        assert [o for o in options if o != "--quiet"] == [o for o in listed if o != "-q"], title
