"""The component calls of azure-ai-ml's notebooks that build nothing to run: CommandComponent's
own arguments, a misspelled step output, a pipeline function registered as a pipeline component."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from distrun import Input, MLClient, Output, ValidationError
from distrun.dsl import pipeline
from distrun.entities import CommandComponent
from distrun.sdk.notices import IgnoredArgumentWarning
from support.sdk import sdk_env

__all__ = ["sdk_env"]  # the fixture, imported for pytest


def clean(**extra: object) -> CommandComponent:
    return CommandComponent(
        name="clean",
        inputs={"raw": Input(type="uri_folder"), "ratio": Input(type="number", default=0.2)},
        outputs={"cleaned": Output(type="uri_folder"), "report": {"type": "uri_file"}},
        command="python clean.py ${{inputs.raw}} ${{inputs.ratio}} ${{outputs.cleaned}} ${{outputs.report}}",
        environment="azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu@latest",
        **extra,
    )


def test_a_command_component_takes_azure_ai_mls_arguments(sdk_env: Path) -> None:
    component = clean(code="./src", version="3", tags={"stage": "prep"})
    assert (component.name, component.version, component.type) == ("clean", "3", "command")
    assert list(component.inputs) == ["raw", "ratio"] and component.inputs.ratio.default == 0.2
    assert component.outputs.report.type == "uri_file"
    assert component.code == str(sdk_env / "src")  # relative to where it was made, as a file's to its folder
    step = component(raw=Input(type="uri_folder", path="./data"))
    assert step.outputs.cleaned.type == "uri_folder"


def test_a_command_component_is_checked_as_a_component_file_is(sdk_env: Path) -> None:
    with pytest.raises(ValidationError, match=r"outputs\.missing"):
        CommandComponent(name="bad", command="echo ${{outputs.missing}}")
    with pytest.warns(IgnoredArgumentWarning, match="additional_includes"):
        clean(additional_includes=["../common"])


def test_a_misspelled_step_output_names_the_output_it_means(sdk_env: Path) -> None:
    @pipeline()
    def prep(raw):
        step = clean()(raw=raw)
        return {"data": step.outputs.cleand}

    with pytest.raises(AttributeError) as raised:
        prep(raw=Input(type="uri_folder", path="./data"))
    assert str(raised.value) == "step clean has no output 'cleand': did you mean outputs.cleaned?"
    assert "clear" not in str(raised.value)  # not a dict's method, as Python itself would suggest


def test_a_pipeline_function_registers_as_a_pipeline_component_that_keeps_its_files(sdk_env: Path) -> None:
    (sdk_env / "src" / "clean.py").write_text("print('cleaned')\n")

    @pipeline()
    def prep(raw, ratio: float = 0.3):
        step = clean(code="./src")(raw=raw, ratio=ratio)
        return {"data": step.outputs.cleaned}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IgnoredArgumentWarning)
        client = MLClient()
    registered = client.components.create_or_update(prep)
    assert (registered.id, registered.type) == ("azureml:prep:1", "pipeline")
    # Its inputs have the types its steps read them as, a default kept; its outputs are what it returns.
    assert {name: i._to_data() for name, i in registered.inputs.items()} == {
        "raw": {"type": "uri_folder"},
        "ratio": {"type": "number", "default": 0.3},
    }
    assert list(registered.outputs) == ["data"]
    # Its step's component is kept in the version, code folder included: a later edit changes nothing.
    document = yaml.safe_load(registered._file.read_text())
    step = document["jobs"]["step"]
    assert step["component"]["code"] == "./jobs/step/code"
    assert step["inputs"] == {"raw": "${{parent.inputs.raw}}", "ratio": "${{parent.inputs.ratio}}"}
    assert (registered._file.parent / "jobs" / "step" / "code" / "clean.py").read_text() == "print('cleaned')\n"
    # A step of another pipeline names it, as a pipeline component.
    outer_step = client.components.get("prep")(raw=Input(type="uri_folder", path="./data"))
    assert outer_step._step_keys()["type"] == "pipeline" and outer_step._step_keys()["component"] == "azureml:prep:1"
    with pytest.raises(TypeError, match=r"or a parallel_run_function\(\.\.\.\)\), not int"):
        client.components.create_or_update(3)
