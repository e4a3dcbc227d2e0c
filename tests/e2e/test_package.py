"""recon as a package, installed like any tool: the wheel `python3 -m build` makes from a
fresh clone holds the JSON Schemas and the web view's files, installs into a fresh venv
(not editable, no site packages of this machine's) and into pipx, reports the version
written in one place, and runs the README's main command from there.

The build and the installs take their dependencies from the package registry, as on a
new machine (pip's cache makes the second time quick).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from reconciler.desired.schema import schemas
from tests.e2e.test_quickstart import ROOT, cloned, main_command, path_without_slurm, run_in

WEB_FILES = {"index.html", "app.js", "style.css", "icon.svg"}


def written_version() -> str:
    """The version, read as text from the one place it is written."""
    found = re.search(
        r'^__version__ = "([^"]+)"$',
        (ROOT / "reconciler" / "__init__.py").read_text(),
        re.MULTILINE,
    )
    assert found is not None
    return found.group(1)


def outside_the_checkout() -> dict[str, str]:
    """This environment without PYTHONPATH, which would import recon from the checkout
    the tests run from instead of from the installed package."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


@pytest.fixture(autouse=True)
def _no_pythonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)  # for test_quickstart.run_in


def run(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=900,
        env=env or outside_the_checkout(),
        cwd=cwd,
    )
    assert result.returncode == 0, f"{argv}:\n{result.stdout}{result.stderr}"
    return result


def test_the_version_is_written_once() -> None:
    """pyproject.toml reads it from reconciler/__init__.py; nothing else writes it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "reconciler.__version__"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a clone of HEAD: the sdist first, the wheel from it, as
    `python3 -m build` does by default (so the sdist cannot lose a file the wheel needs)."""
    where = tmp_path_factory.mktemp("build")
    clone = cloned(where)
    run([sys.executable, "-m", "build", "--outdir", str(where / "dist"), str(clone)])
    (built,) = (where / "dist").glob("recon-*.whl")
    return built


def test_the_wheel_holds_the_schemas_and_the_web_files(wheel: Path) -> None:
    assert wheel.name == f"recon-{written_version()}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name, text in schemas().items():
            assert archive.read(f"reconciler/schemas/{name}").decode() == text, name
        assert {f"reconciler/web/static/{name}" for name in WEB_FILES} <= names
        assert not any(name.startswith(("tests/", "examples/", "bench/")) for name in names)
        metadata = archive.read(f"recon-{written_version()}.dist-info/METADATA").decode()
    assert f"\nVersion: {written_version()}\n" in metadata
    assert "\nRequires-Dist: typer" in metadata


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed into it, and nothing else of this machine's."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", str(folder)])
    run([str(folder / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    return folder


def test_the_installed_package_is_the_wheel_and_finds_its_files(venv: Path) -> None:
    python = str(venv / "bin" / "python")
    found = run(
        [
            python,
            "-c",
            "import reconciler, importlib.metadata as m; "
            "print(reconciler.__file__); print(m.version('recon'))",
        ],
        cwd=venv,
    ).stdout.split()
    assert found == [
        str(
            venv
            / "lib"
            / f"python{sys.version_info.major}.{sys.version_info.minor}"
            / "site-packages"
            / "reconciler"
            / "__init__.py"
        ),
        written_version(),
    ]
    read = (
        "from importlib.resources import files; "
        "print(sorted(p.name for p in files('reconciler.schemas').iterdir() "
        "if p.name.endswith('.json'))); "
        "print(len(files('reconciler.web').joinpath('static', 'index.html').read_bytes()) > 0)"
    )
    names, page = run([python, "-c", read], cwd=venv).stdout.splitlines()
    assert names == str(sorted(schemas()))
    assert page == "True"


def test_recon_version_prints_the_written_version(venv: Path) -> None:
    recon = str(venv / "bin" / "recon")
    assert run([recon, "--version"]).stdout == written_version() + "\n"
    assert run([recon, "version"]).stdout == written_version() + "\n"


def test_the_readme_main_command_runs_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    clone = cloned(tmp_path)
    path = f"{venv / 'bin'}{os.pathsep}{path_without_slurm(tmp_path)}"
    assert shutil.which("recon", path=path) == str(venv / "bin" / "recon")
    result = run_in(clone, main_command(), path, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(scheduler: local)" in result.stdout
    assert (clone / "examples" / "repo" / "runs" / "evaluate" / "metrics.json").exists()


def test_pipx_installs_the_wheel_as_a_tool(wheel: Path, tmp_path: Path) -> None:
    pipx = {
        **outside_the_checkout(),
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    run([sys.executable, "-m", "pipx", "install", str(wheel)], env=pipx)
    recon = tmp_path / "bin" / "recon"
    assert run([str(recon), "--version"]).stdout == written_version() + "\n"
    clone = cloned(tmp_path)
    validated = run([str(recon), "validate", "examples/repo"], cwd=clone)
    assert validated.stdout.startswith("OK: project cartpole, ")
