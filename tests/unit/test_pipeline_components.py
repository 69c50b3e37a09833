"""Components registered with `distrun component create`, named by pipeline steps as
`azureml:NAME:VERSION` or `azureml:NAME@latest`: a snapshot, unchanged by later edits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError, ValidationError
from distrun.loading.pipeline_loader import load_component_file, load_pipeline_file
from distrun.store.components import get_component, list_components, parse_reference, register_component

CHAIN = Path(__file__).parents[1] / "data" / "pipelines" / "chain"


def _register(home: Path, folder: Path, version: str | None = None):  # type: ignore[no-untyped-def]
    component = load_component_file(folder / "train.yml")
    text = (folder / "train.yml").read_text()
    return register_component(home, component.data, text, component.base_dir, "train", version)


def test_a_registered_component_is_a_snapshot_steps_name(distrun_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "chain"
    shutil.copytree(CHAIN, folder)
    first = _register(distrun_home, folder, "1")
    assert (first.folder / "code" / "train.py").is_file()
    assert "code: ./code" in first.file.read_text() and "version: '1'" in first.file.read_text()
    (folder / "src" / "train.py").write_text("raise SystemExit('edited later')\n")  # changes no version
    second = _register(distrun_home, folder)
    assert second.version == "2" and [c.version for c in list_components(distrun_home)] == ["1", "2"]
    pipeline = folder / "pipeline.yml"
    pipeline.write_text(pipeline.read_text().replace("component: ./train.yml", "component: azureml:train:1"))
    train = load_pipeline_file(pipeline).steps["train"]
    assert train.document["code"] == str(first.folder / "code")
    assert "edited later" not in (Path(train.document["code"]) / "train.py").read_text()
    assert train.component == str(first.file.resolve())
    assert get_component(distrun_home, "train", label="latest").version == "2"


def test_versions_never_change_and_unknown_ones_are_named(distrun_home: Path, tmp_path: Path) -> None:
    _register(distrun_home, CHAIN, "1")
    with pytest.raises(DistrunError, match="already has version 1"):
        _register(distrun_home, CHAIN, "1")
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(
        "type: pipeline\njobs:\n  a:\n    component: azureml:train:7\n  b:\n    component: azureml:nope@latest\n"
        "  c:\n    component: azureml://registries/azureml/components/x/versions/1\n"
    )
    with pytest.raises(ValidationError) as caught:
        load_pipeline_file(pipeline)
    text = caught.value.render()
    assert "4:5: jobs.a.component: component train has no version '7' (versions: 1)" in text
    assert "6:5: jobs.b.component: there is no registered component named 'nope'" in text
    assert "distrun component create --file component.yml" in text
    assert "8:5: jobs.c.component: 'azureml://registries/" in text and "registries are not supported" in text


def test_a_component_file_is_checked_before_it_is_registered(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("type: command\ninputs:\n  x: {type: integer}\ncommand: echo ${{inputs.y}}\n")
    with pytest.raises(ValidationError) as caught:
        load_component_file(bad)
    (problem,) = caught.value.problems
    assert problem.message == "${{inputs.y}} refers to an undefined input 'y'"
    assert problem.position is not None and problem.position.line == 4
    assert parse_reference("azureml:train:3") == ("train", "3", None)
    assert parse_reference("azureml:train@latest") == ("train", None, "latest")
    assert parse_reference("azureml:train") == ("train", None, None)
    assert parse_reference("./train.yml") is None
