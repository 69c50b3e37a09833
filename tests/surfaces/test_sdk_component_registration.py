"""Components registered from Python run as steps, as Microsoft's notebooks register them:
`ml_client.components.create_or_update(fn)` for an `@command_component` function, for a
`CommandComponent(name=..., command=...)` made with azure-ai-ml's arguments, and for a
`parallel_run_function(...)`. Each is recorded as NAME:VERSION with a snapshot of its code, and
a pipeline's step that names it runs it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from distrun import Input, MLClient, Output
from distrun.core.errors import ValidationError
from distrun.dsl import pipeline
from distrun.entities import CommandComponent
from distrun.parallel import RunFunction, parallel_run_function
from support.sdk import sdk_env, write

__all__ = ["sdk_env"]  # the fixture, imported for pytest


def completed(client: MLClient, job: Any, capsys: Any) -> str:
    """Submit the pipeline, stream it to its end; its name, once it completed."""
    submitted = client.jobs.create_or_update(job)
    client.jobs.stream(submitted.name)
    assert "Status: Completed" in capsys.readouterr().out
    return str(submitted.name)


def test_a_function_component_and_a_python_made_component_register_and_run_as_steps(sdk_env: Path, capsys) -> None:
    functions = write(
        sdk_env / "steps" / "functions.py",
        """
        from pathlib import Path
        from mldesigner import command_component, Input, Output

        @command_component(display_name="Count")
        def count_words(text: Input(type="uri_folder"), counted: Output(type="uri_folder"), scale: int = 1):
            words = (Path(text) / "sample.txt").read_text().split()
            (Path(counted) / "count.txt").write_text(str(len(words) * scale))
        """,
    )
    sys.path.insert(0, str(functions.parent))
    try:
        from functions import count_words  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(functions.parent))
        sys.modules.pop("functions", None)
    write(
        sdk_env / "src" / "label.py",
        """
        import sys
        count = open(sys.argv[2] + "/count.txt").read()
        open(sys.argv[3] + "/label.txt", "w").write(sys.argv[1] + count)
        """,
    )
    label = CommandComponent(
        name="label",
        display_name="Label",
        inputs={"counted": Input(type="uri_folder"), "prefix": Input(type="string", default="n=")},
        outputs={"labelled": Output(type="uri_folder")},
        code="./src",
        command="python label.py ${{inputs.prefix}} ${{inputs.counted}} ${{outputs.labelled}}",
    )
    client = MLClient()
    counted = client.components.create_or_update(count_words)
    labelled = client.components.create_or_update(label)
    assert (counted.id, labelled.id) == ("azureml:count_words:1", "azureml:label:1")
    # A version never changes: what the function's file and the code folder hold later is not run.
    functions.write_text("raise SystemExit('the edited file ran')\n")
    (sdk_env / "src" / "label.py").write_text("raise SystemExit('the edited file ran')\n")

    @pipeline(default_compute="local")
    def words(text):
        counting = client.components.get("count_words", "1")(text=text, scale=10)
        naming = client.components.get("label")(counted=counting.outputs.counted)
        return {"label": naming.outputs.labelled}

    name = completed(client, words(text=Input(type="uri_folder", path="./data")), capsys)
    label_file = client.layout.job(f"{name}.naming").named_output("labelled") / "label.txt"
    assert label_file.read_text() == "n=30"


def test_a_pipeline_function_registers_and_runs_as_a_step_of_another_pipeline(sdk_env: Path, capsys) -> None:
    double_py = write(
        sdk_env / "src" / "double.py",
        """
        import pathlib, sys
        numbers = (pathlib.Path(sys.argv[1]) / "sample.txt").read_text().split()
        (pathlib.Path(sys.argv[2]) / "doubled.txt").write_text(" ".join(str(2 * int(n)) for n in numbers))
        """,
    )
    double = CommandComponent(
        name="double",
        inputs={"numbers": Input(type="uri_folder")},
        outputs={"doubled": Output(type="uri_folder")},
        code="./src",
        command="python double.py ${{inputs.numbers}} ${{outputs.doubled}}",
    )

    @pipeline()
    def doubling(numbers):
        twice = double(numbers=numbers)
        return {"result": twice.outputs.doubled}

    client = MLClient()
    assert client.components.create_or_update(doubling).id == "azureml:doubling:1"
    double_py.write_text("raise SystemExit('the edited file ran')\n")  # the version keeps its own copy
    stage = client.components.get("doubling")

    @pipeline(default_compute="local")
    def outer(numbers):
        inner = stage(numbers=numbers)
        return {"out": inner.outputs.result}

    name = completed(client, outer(numbers=Input(type="uri_folder", path="./data")), capsys)
    doubled = client.layout.job(f"{name}.inner.twice").named_output("doubled") / "doubled.txt"
    assert doubled.read_text() == "2 4 6"


def test_a_parallel_function_registers_as_a_parallel_component_and_runs_as_a_step(sdk_env: Path, capsys) -> None:
    score_py = write(
        sdk_env / "score" / "score.py",
        """
        import argparse, os

        def init():
            global suffix
            parser = argparse.ArgumentParser()
            parser.add_argument("--suffix")
            suffix = parser.parse_known_args()[0].suffix

        def run(mini_batch):
            return [f"{os.path.basename(path)} {suffix}" for path in mini_batch]
        """,
    )
    for n in range(4):
        write(sdk_env / "files" / f"f{n}.txt", f"{n}\n")

    def scorer(entry_script: str) -> Any:
        return parallel_run_function(
            name="scorer",
            display_name="Scorer",
            inputs={"files": Input(type="uri_folder")},
            outputs={"scores": Output(type="uri_file")},
            input_data="${{inputs.files}}",
            mini_batch_size="1",
            max_concurrency_per_instance=1,
            task=RunFunction(
                code="./score",
                entry_script=entry_script,
                program_arguments="--suffix ok",
                append_row_to="${{outputs.scores}}",
            ),
        )

    client = MLClient()
    with pytest.raises(ValidationError, match=r"entry script 'missing\.py' is not a file"):  # as a file is
        client.components.create_or_update(scorer("missing.py"))
    registered = client.components.create_or_update(scorer("score.py"))
    assert (registered.id, registered.type) == ("azureml:scorer:1", "parallel")
    assert [c.id for c in client.components.list("scorer")] == ["azureml:scorer:1"]
    score_py.write_text("raise SystemExit('the edited file ran')\n")  # the version keeps its own copy

    @pipeline(default_compute="local")
    def scoring(files):
        scored = client.components.get("scorer", "1")(files=files)
        scored.max_concurrency_per_instance = 2  # the step's settings over the component's
        scored.mini_batch_size = "2"
        return {"scores": scored.outputs.scores}

    name = completed(client, scoring(files=Input(type="uri_folder", path="./files")), capsys)
    step = client.layout.job(f"{name}.scored")
    rows = (step.named_output("scores") / "scores").read_text().splitlines()
    assert sorted(rows) == [f"f{n}.txt ok" for n in range(4)]
    assert "mini-batches: 2, succeeded: 2" in (step.root / "code" / "logs" / "job_result.txt").read_text()
    assert len(list((step.root / "user_logs").glob("std_log_process_*.txt"))) == 2
