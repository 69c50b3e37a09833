"""mldesigner's `@command_component` in distrun: a Python function's signature is its component's
declaration, its command runs the function through `mldesigner execute`, and a conda file that
only brings Microsoft's mldesigner is left to distrun's own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from distrun.sdk.designer import FunctionComponent, execute

COMPONENTS = '''
from pathlib import Path
from mldesigner import command_component, Input, Output


@command_component(display_name="Train", environment="./env.yaml")
def train_model(
    data: Input(type="uri_file"), epochs: int, model: Output(type="uri_folder"), lr=0.02, note: str = None
) -> int:
    """Train it."""
    (Path(model) / "model").write_text(f"{Path(data).read_text().strip()} x{epochs} lr={lr} note={note}")
    return epochs * 2


@command_component
def plain(flag: bool, ratio: float, words="a b"):
    print(flag, ratio, words)
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "designer_components.py").write_text(COMPONENTS)
    spec = importlib.util.spec_from_file_location("designer_components", tmp_path / "designer_components.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "designer_components", loaded)
    return spec, loaded


def _env(tmp_path: Path, pip: list[str]) -> None:
    lines = "".join(f"      - {line}\n" for line in pip)
    (tmp_path / "env.yaml").write_text(
        "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04\n"
        "conda_file:\n  dependencies:\n    - python=3.8.12\n    - pip=21.2.2\n    - pip:\n" + lines
    )


def test_a_functions_signature_is_its_components_declaration_and_command(tmp_path: Path, module) -> None:  # type: ignore[no-untyped-def]
    spec, loaded = module
    _env(tmp_path, ["mldesigner==0.1.0b17"])
    with pytest.warns(UserWarning, match="its conda file only installs mldesigner, which distrun provides"):
        spec.loader.exec_module(loaded)
    train: FunctionComponent = loaded.train_model
    assert train.name == "train_model" and train.display_name == "Train" and train.description == "Train it."
    data = train._step_component()
    assert data["inputs"] == {
        "data": {"type": "uri_file"},
        "epochs": {"type": "integer"},
        "lr": {"type": "number", "default": 0.02},
        "note": {"type": "string", "optional": True},
    }
    assert data["outputs"] == {"model": {"type": "uri_folder"}, "output": {"type": "integer"}}
    assert data["code"] == str(tmp_path)
    assert "environment" not in data  # distrun's own Python runs it, not the image (which has no distrun)
    assert data["command"] == (
        'python -c "from mldesigner._cli.mldesigner_commands import main; main()" execute '
        "--source designer_components.py --name train_model "
        "--inputs data=${{inputs.data}} epochs=${{inputs.epochs}} lr=${{inputs.lr}} $[[note=${{inputs.note}}]] "
        "--outputs model=${{outputs.model}} output=${{outputs.output}}"
    )
    assert loaded.plain._step_component()["inputs"] == {
        "flag": {"type": "boolean"},
        "ratio": {"type": "number"},
        "words": {"type": "string", "default": "a b"},
    }


def test_an_environment_with_more_than_mldesigner_is_kept(tmp_path: Path, module) -> None:  # type: ignore[no-untyped-def]
    spec, loaded = module
    _env(tmp_path, ["mldesigner==0.1.0b17", "numpy==1.26.4"])
    spec.loader.exec_module(loaded)
    environment = loaded.train_model._step_component()["environment"]
    assert environment["conda_file"]["dependencies"][-1] == {"pip": ["mldesigner==0.1.0b17", "numpy==1.26.4"]}


def test_execute_calls_the_function_with_typed_inputs_and_writes_its_return_value(tmp_path: Path, module) -> None:  # type: ignore[no-untyped-def]
    _env(tmp_path, ["numpy==1.26.4"])
    (tmp_path / "data.txt").write_text("rows\n")
    (tmp_path / "model").mkdir()
    returned = tmp_path / "returned"
    result = execute(
        str(tmp_path / "designer_components.py"),
        "train_model",
        {"data": str(tmp_path / "data.txt"), "epochs": "3"},
        {"model": str(tmp_path / "model"), "output": str(returned)},
    )
    assert result == 6 and returned.read_text() == "6"
    assert (tmp_path / "model" / "model").read_text() == "rows x3 lr=0.02 note=None"
    with pytest.raises(Exception, match="has no component 'nope'"):
        execute(str(tmp_path / "designer_components.py"), "nope", {}, {})


def test_the_mldesigner_package_is_distruns() -> None:
    import mldesigner
    from distrun.sdk.designer import command_component
    from distrun.sdk.inputs_outputs import Input, Output

    assert (mldesigner.command_component, mldesigner.Input, mldesigner.Output) == (command_component, Input, Output)
