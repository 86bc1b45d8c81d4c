"""The packages anyone can install and test: a wheel with the package alone, a source distribution
whose own tests collect and run after unpacking, metadata that passes a strict check, one version."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_wheel_holds_the_package_its_license_and_no_tests_or_data(dist):
    from selcal import __version__

    (wheel,) = dist.glob("*.whl")
    assert wheel.name.startswith(f"selcal-{__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "sample_logits/", "docs/", "bench/"))]
    assert "selcal/cli/__init__.py" in names
    assert {"selcal/py.typed", "selcal/schema/result-1.json"} <= set(names)  # typed; the results' JSON Schema


@pytest.mark.slow
def test_the_metadata_passes_a_strict_check(dist):
    pytest.importorskip("twine")
    result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_source_distribution_runs_its_own_tests_after_unpacking(dist, tmp_path):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    (top,) = tmp_path.iterdir()
    for needed in ("LICENSE", "tests/conftest.py", "tests/golden/expected", "sample_logits"):
        assert (top / needed).exists(), needed
    env = {"PYTHONPATH": str(top), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    collect = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                             cwd=top, capture_output=True, text=True, env=env, timeout=600)
    assert collect.returncode == 0 and " error" not in collect.stdout.splitlines()[-1], collect.stdout[-3000:]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
                          "tests/golden/test_golden_compare.py", "tests/docs/test_docs.py"],
                         cwd=top, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]


@pytest.mark.slow
def test_pip_installs_selcal_from_a_git_url_pinned_to_a_tag(tmp_path):
    """The README's install line for another project or a CI job, with this repository as the remote."""
    from selcal import __version__

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked source distribution)")
    clone = tmp_path / "remote"
    git = lambda *args, cwd=clone: subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,  # noqa: E731
                                                  check=True)
    git("clone", "--quiet", "--no-local", str(ROOT), str(clone), cwd=tmp_path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "tag", f"v{__version__}")
    target = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                             f"selcal @ git+file://{clone}@v{__version__}"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    installed = (target / "selcal" / "_version.py").read_text()
    assert f'"{__version__}"' in installed
    assert not (target / "tests").exists() and not (target / "sample_logits").exists()
