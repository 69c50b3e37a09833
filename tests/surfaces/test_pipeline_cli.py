"""Pipeline files at the command line: `plan` and `job validate` take them, a bad one is every
problem at once with no traceback, `component create` registers what steps name."""

from __future__ import annotations

import json

from support.cli import REPO

CHAIN = REPO / "tests" / "data" / "pipelines" / "chain" / "pipeline.yml"
EVERY_PROBLEM = REPO / "tests" / "data" / "invalid_pipelines" / "27-every-problem-at-once.yml"


def test_plan_and_validate_take_a_pipeline(run_cli) -> None:
    plan = run_cli("plan", str(CHAIN))
    assert plan.returncode == 0, plan.stderr
    assert "pipeline: pipeline (chain)  steps: 3" in plan.stdout
    assert "  level 2: score  after train  (model <- train.model)" in plan.stdout
    assert "=== step train: job pipeline.train" in plan.stdout and "[1/3] rank_3" in plan.stdout
    shown = json.loads(run_cli("plan", str(CHAIN), "-o", "json", "--set", "name=nightly").stdout)
    assert [step["job"] for step in shown["steps"]] == ["nightly.prepare", "nightly.train", "nightly.score"]
    validated = run_cli("job", "validate", "-f", str(CHAIN), "-o", "json")
    assert validated.returncode == 0, validated.stderr
    steps = json.loads(validated.stdout)["steps"]
    assert steps["train"]["depends_on"] == ["prepare"] and steps["train"]["compute"] == "local"
    assert steps["train"]["job"]["inputs"]["epochs"] == 3
    # For people by default: what was checked, then every resolved key on a line of its own.
    readable = run_cli("job", "validate", "-f", str(CHAIN))
    assert readable.returncode == 0 and readable.stdout.startswith(f"{CHAIN}: a valid pipeline job\n")
    assert ["steps.train.depends_on", "prepare"] in [line.split() for line in readable.stdout.splitlines()]


def test_a_bad_pipeline_is_every_problem_at_once(run_cli) -> None:
    for verb in (("plan",), ("job", "validate", "-f"), ("run",)):
        result = run_cli(*verb, str(EVERY_PROBLEM))
        assert result.returncode == 2, result.stdout + result.stderr
        assert "invalid job: 7 problems" in result.stderr
        assert (
            "jobs.score.inputs.data: ${{parent.jobs.trian.outputs.model}} refers to an undefined step" in result.stderr
        )
        assert "Traceback" not in result.stderr


def test_an_unknown_step_compute_is_named_and_compute_local_runs_it(run_cli) -> None:
    result = run_cli("plan", str(CHAIN), "--set", "jobs.score.compute=azureml:gpu-cluster")
    assert result.returncode == 2
    assert "jobs.score.compute: step score: unknown compute target 'gpu-cluster'" in result.stderr
    assert (
        run_cli("plan", str(CHAIN), "--set", "jobs.score.compute=azureml:gpu-cluster", "--compute", "local").returncode
        == 0
    )


def test_component_create_list_show_and_a_step_naming_it(run_cli, distrun_home, tmp_path) -> None:
    import shutil

    folder = tmp_path / "chain"
    shutil.copytree(CHAIN.parent, folder)
    created = run_cli("component", "create", "-f", str(folder / "train.yml"), "-o", "json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["version"] == "1"  # the file's version
    again = run_cli("component", "create", "-f", str(folder / "train.yml"))
    assert again.returncode == 2 and "component train already has version 1" in again.stderr
    bumped = run_cli("component", "create", "-f", str(folder / "train.yml"), "--set", "version=5", "-o", "json")
    assert bumped.returncode == 0 and json.loads(bumped.stdout)["version"] == "5", bumped.stderr
    assert [c["version"] for c in json.loads(run_cli("component", "list", "-o", "json").stdout)] == ["1", "5"]
    shown = json.loads(run_cli("component", "show", "-n", "train", "-l", "latest", "-o", "json").stdout)
    assert "code: ./code" in shown["yaml"]
    readable = run_cli("component", "show", "-n", "train").stdout  # its fields, then its YAML as written
    assert ["version", "5"] in [line.split() for line in readable.splitlines()] and "\ncode: ./code\n" in readable
    pipeline = folder / "pipeline.yml"
    pipeline.write_text(pipeline.read_text().replace("component: ./train.yml", "component: azureml:train@latest"))
    plan = run_cli("plan", str(pipeline))
    assert plan.returncode == 0, plan.stderr
    assert f"=== step train: job pipeline.train, component {shown['path']}, 4 processes" in plan.stdout


BOUND = REPO / "tests" / "data" / "pipelines" / "bound_settings" / "pipeline.yml"


def test_a_steps_compute_bound_to_a_pipeline_input_is_that_inputs_value(run_cli) -> None:
    plan = run_cli("plan", str(BOUND))
    assert plan.returncode == 0, plan.stderr
    assert "=== step stage.write: job pipeline.stage.write, inline command, 2 processes" in plan.stdout
    assert "compute: local (local)" in plan.stdout
    # The input set at the command line is the compute the step is checked against.
    other = run_cli("plan", str(BOUND), "--set", "inputs.compare_compute=azureml:gpu-cluster")
    assert other.returncode == 2
    assert "jobs.compare.compute: step compare: unknown compute target 'gpu-cluster'" in other.stderr


def test_component_create_registers_a_pipeline_component_which_a_step_names(run_cli, tmp_path) -> None:
    import shutil

    shutil.copytree(REPO / "tests" / "data" / "pipelines", tmp_path / "pipelines")
    nested = tmp_path / "pipelines" / "nested"
    created = run_cli("component", "create", "-f", str(nested / "train_stage.yml"), "-o", "json")
    assert created.returncode == 0, created.stderr
    registered = json.loads(created.stdout)
    assert (registered["name"], registered["version"]) == ("train_stage", "1")
    # Its steps' components are kept inline with their code: later edits change no pipeline.
    for component in ("prepare.yml", "train.yml"):
        (tmp_path / "pipelines" / "chain" / component).unlink()
    pipeline = nested / "pipeline.yml"
    pipeline.write_text(
        pipeline.read_text().replace("component: ./train_stage.yml", "component: azureml:train_stage:1")
    )
    plan = run_cli("plan", str(pipeline))
    assert plan.returncode == 0, plan.stderr
    assert "level 1: stage.train  after stage.prepare" in plan.stdout
    # A step's component that is not there is refused at its file:line, nothing registered.
    bad = tmp_path / "bad.yml"
    bad.write_text("type: pipeline\nname: bad\njobs:\n  a:\n    type: command\n    component: ./missing.yml\n")
    refused = run_cli("component", "create", "-f", str(bad))
    assert refused.returncode == 2 and f"{bad}:6:5: jobs.a.component: component file" in refused.stderr
    assert "does not exist" in refused.stderr and "Traceback" not in refused.stderr
    assert "bad" not in run_cli("component", "list").stdout
