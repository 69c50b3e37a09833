"""A pipeline built with the SDK runs for real on local compute: `@dsl.pipeline` with a component
from YAML and a `command(...)` step reading its output, submitted, streamed and read back with
`MLClient.jobs`, through the runner `distrun run pipeline.yml` uses."""

from __future__ import annotations

from pathlib import Path

from distrun import Input, MLClient, Output, command, load_component
from distrun.dsl import pipeline
from support.sdk import sdk_env, write

__all__ = ["sdk_env"]  # the fixture, imported for pytest


def test_a_two_step_sdk_pipeline_chains_an_output(sdk_env: Path, capsys) -> None:
    write(
        sdk_env / "src" / "double.py",
        """
        import pathlib, sys
        numbers = (pathlib.Path(sys.argv[1]) / "sample.txt").read_text().split()
        (pathlib.Path(sys.argv[2]) / "doubled.txt").write_text(" ".join(str(2 * int(n)) for n in numbers))
        """,
    )
    write(
        sdk_env / "double.yml",
        """
        type: command
        name: double
        inputs:
          numbers: {type: uri_folder}
        outputs:
          doubled: {type: uri_folder}
        code: ./src
        command: python double.py ${{inputs.numbers}} ${{outputs.doubled}}
        """,
    )
    double = load_component(source="./double.yml")
    total = command(
        command="python -c \"import sys; t = sum(map(int, open(sys.argv[1] + '/doubled.txt').read().split()));"
        " open(sys.argv[2] + '/total.txt', 'w').write(f'{sys.argv[3]}{t}')\""
        " ${{inputs.doubled}} ${{outputs.total}} ${{inputs.label}}",
        inputs={"doubled": Input(type="uri_folder"), "label": "sum="},
        outputs={"total": Output(type="uri_folder")},
    )

    @pipeline(description="double, then add up")
    def add_up(numbers):
        first = double(numbers=numbers)
        second = total(doubled=first.outputs.doubled)
        return {"result": second.outputs.total}

    job = add_up(numbers=Input(type="uri_folder", path="./data"))
    job.settings.default_compute = "local"
    client = MLClient()
    submitted = client.jobs.create_or_update(job, experiment_name="sdk-pipelines")
    client.jobs.stream(submitted.name)
    shown = capsys.readouterr().out
    assert f"[first] Completed (job {submitted.name}.first)" in shown
    assert "Status: Completed" in shown and "second  Completed" in shown

    done = client.jobs.get(submitted.name)
    assert done.status == "Completed" and list(done.jobs) == ["first", "second"]
    assert [step.status for step in done.jobs.values()] == ["Completed", "Completed"]
    assert {j.name for j in client.jobs.list(parent_job_name=submitted.name)} == {
        f"{submitted.name}.first",
        f"{submitted.name}.second",
    }
    assert done.jobs.second.experiment_name == "sdk-pipelines"
    # The second step read what the first wrote, by path: 2*(1+2+3).
    folder = client.layout.job(f"{submitted.name}.second").named_output("total")
    assert (folder / "total.txt").read_text() == "sum=12"
    assert (client.layout.job(submitted.name).root / "pipeline.yml").is_file()  # the document it ran


def test_command_component_functions_run_as_steps_passing_a_return_value(sdk_env: Path, capsys) -> None:
    # Written as Microsoft's mldesigner examples write them: `from mldesigner import ...`.
    write(
        sdk_env / "steps" / "functions.py",
        """
        from pathlib import Path
        from mldesigner import command_component, Input, Output

        @command_component(display_name="Count")
        def count_words(text: Input(type="uri_folder"), counted: Output(type="uri_folder"), scale=1) -> int:
            words = (Path(text) / "sample.txt").read_text().split()
            (Path(counted) / "words.txt").write_text("\\n".join(words))
            return len(words) * scale

        @command_component()
        def report(counted: Input(type="uri_folder"), total: int, out: Output(type="uri_folder"), label: str = None):
            lines = (Path(counted) / "words.txt").read_text().splitlines()
            (Path(out) / "report.txt").write_text(f"{label} {total} {lines}")
            print("reported", total)
        """,
    )
    import sys

    sys.path.insert(0, str(sdk_env / "steps"))
    try:
        from functions import count_words, report  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(sdk_env / "steps"))
        sys.modules.pop("functions", None)

    @pipeline(default_compute="local")
    def words(text):
        counting = count_words(text=text, scale=10)
        summary = report(counted=counting.outputs.counted, total=counting.outputs.output, label="total:")
        return {"report": summary.outputs.out}

    client = MLClient()
    submitted = client.jobs.create_or_update(words(text=Input(type="uri_folder", path="./data")))
    client.jobs.stream(submitted.name)
    assert "Status: Completed" in capsys.readouterr().out
    # The return value went from the first step's value output to the second step's integer input.
    report_file = client.layout.job(f"{submitted.name}.summary").named_output("out") / "report.txt"
    assert report_file.read_text() == "total: 30 ['1', '2', '3']"


def test_a_pipeline_loaded_from_yaml_runs_with_the_inputs_a_notebook_set(sdk_env: Path, capsys) -> None:
    # As Microsoft's notebooks do: load_job("pipeline.yml"), set inputs and compute, submit.
    write(
        sdk_env / "pipelines" / "scale.yml",
        """
        $schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
        type: pipeline
        inputs:
          factor: 2
          numbers: {type: uri_folder, path: ../data}
        outputs:
          scaled: {type: uri_folder}
        settings: {default_compute: cpu-cluster-that-does-not-exist}
        jobs:
          scale:
            type: command
            inputs: {factor: "${{parent.inputs.factor}}", numbers: "${{parent.inputs.numbers}}"}
            outputs: {scaled: "${{parent.outputs.scaled}}"}
            command: >-
              python -c "import sys; n = open(sys.argv[1] + '/sample.txt').read().split();
              open(sys.argv[3] + '/scaled.txt', 'w').write(' '.join(str(int(x) * int(sys.argv[2])) for x in n))"
              ${{inputs.numbers}} ${{inputs.factor}} ${{outputs.scaled}}
        """,
    )
    from distrun import load_job

    pipeline_job = load_job("./pipelines/scale.yml")
    pipeline_job.inputs.factor = 5
    pipeline_job.settings.default_compute = "local"
    client = MLClient()
    submitted = client.jobs.create_or_update(pipeline_job, experiment_name="loaded")
    client.jobs.stream(submitted.name)
    assert "Status: Completed" in capsys.readouterr().out
    done = client.jobs.get(submitted.name)
    assert done.jobs.scale.experiment_name == "loaded" and done.jobs.scale.status == "Completed"
    scaled = client.layout.job(f"{submitted.name}.scale").named_output("scaled") / "scaled.txt"
    assert scaled.read_text() == "5 10 15"  # the factor set in Python, the data found from the file's folder


def test_a_pipelines_outputs_are_its_own_in_the_sdk(sdk_env: Path, capsys) -> None:
    from distrun import load_job
    from support.cli import REPO

    pipeline_job = load_job(REPO / "tests" / "data" / "pipelines" / "outputs" / "pipeline.yml")
    client = MLClient()
    submitted = client.jobs.create_or_update(pipeline_job)
    client.jobs.stream(submitted.name)
    assert "Status: Completed" in capsys.readouterr().out
    done = client.jobs.get(submitted.name)
    assert list(done.outputs) == ["summary"]
    assert done.outputs["summary"].path == f"azureml://jobs/{submitted.name}/outputs/summary"
    client.jobs.download(submitted.name, download_path=sdk_env / "got", output_name="summary")
    assert (sdk_env / "got" / "named-outputs" / "summary" / "report.txt").read_text() == "written\n"


def test_a_steps_compute_and_resources_from_the_pipelines_parameters(sdk_env: Path, capsys) -> None:
    # As Microsoft's train/eval pipeline component does: the compute is a parameter of the pipeline.
    write_note = command(
        command="echo written > ${{outputs.note}}/note.txt",
        outputs={"note": Output(type="uri_folder")},
    )

    @pipeline(default_compute="cluster-that-does-not-exist")
    def noted(target, nodes):
        step = write_note()
        step.compute = target
        step.resources = {"instance_count": nodes}
        return {"note": step.outputs.note}

    job = noted(target="local", nodes=2)
    shown = str(job)  # the pipeline's YAML, each setting its binding
    assert "compute: ${{parent.inputs.target}}" in shown and "instance_count: ${{parent.inputs.nodes}}" in shown
    client = MLClient()
    submitted = client.jobs.create_or_update(job)
    client.jobs.stream(submitted.name)
    assert "Status: Completed" in capsys.readouterr().out
    done = client.jobs.get(submitted.name)
    assert done.jobs.step.compute == "local"
    from distrun.runner.jobs import get_job

    assert len(get_job(client.layout, f"{submitted.name}.step").processes or []) == 2  # 2 nodes
    assert client.layout.job(f"{submitted.name}.step").named_output("note").joinpath("note.txt").is_file()
