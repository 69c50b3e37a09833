"""distrun and Microsoft's mldesigner install into one Python side by side: distrun's wheel holds
none of the files Microsoft's wheel holds, so installing either never replaces the other's.
distrun's own `mldesigner` is the distribution distrun-mldesigner, which is that package and so
replaces Microsoft's by design (docs/sdk.md says to install one of the two).

tests/data/mldesigner-0.1.0b23-files.txt is the list of the files in Microsoft's wheel
(mldesigner-0.1.0b23-py3-none-any.whl, from PyPI). The packages distrun's wheel holds are found as
setuptools finds them when it builds the wheel: with the `[tool.setuptools.packages.find]`
settings of pyproject.toml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import find_packages

from support.cli import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own TOML reader on 3.10
    import tomli as tomllib

MICROSOFTS_FILES = (REPO / "tests" / "data" / "mldesigner-0.1.0b23-files.txt").read_text().split()


def packages_of(project: Path) -> list[str]:
    """The packages setuptools puts into the wheel of the project at `project`."""
    settings = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    where = project / settings.get("where", ["."])[0]
    return find_packages(str(where), include=settings.get("include", ["*"]), exclude=settings.get("exclude", []))


def wheel_files(project: Path) -> set[str]:
    """The files of those packages, as paths in the wheel (package data included)."""
    where = project / "src"
    return {
        path.relative_to(where).as_posix()
        for package in packages_of(project)
        for path in (where / package.replace(".", "/")).iterdir()
        if path.is_file() and path.suffix != ".pyc"
    }


def test_distruns_wheel_holds_no_file_of_microsofts_mldesigner() -> None:
    packages = packages_of(REPO)
    assert "distrun" in packages and "distrun.spec" in packages
    assert {name.split(".")[0] for name in packages} == {"distrun"}
    microsofts = {name for name in MICROSOFTS_FILES if ".dist-info/" not in name}
    assert "mldesigner/__init__.py" in microsofts and "mldesigner/_cli/mldesigner_commands.py" in microsofts
    assert wheel_files(REPO) & microsofts == set()
    assert {name.split("/")[0] for name in wheel_files(REPO)} & {name.split("/")[0] for name in microsofts} == set()


def test_distruns_mldesigner_is_a_distribution_of_its_own() -> None:
    project = REPO / "distributions" / "distrun-mldesigner"
    assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["name"] == "distrun-mldesigner"
    assert {name.split(".")[0] for name in packages_of(project)} == {"mldesigner"}
    # The entry a function component's step runs is where Microsoft's package has it.
    assert "mldesigner/_cli/mldesigner_commands.py" in wheel_files(project) & set(MICROSOFTS_FILES)
