"""`distrun plan pipeline.yml`: the graph, then each step's job planned as `distrun plan` plans a job,
its inputs from other steps at the folders those steps' jobs will write."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.pipeline_loader import load_pipeline_file
from distrun.plan.pipeline_text import pipeline_as_text
from distrun.runner.pipelines import check_pipeline, plan_pipeline, step_job_name
from distrun.store.layout import Layout

CHAIN = Path(__file__).parents[1] / "data" / "pipelines" / "chain" / "pipeline.yml"


def test_plan_shows_the_graph_and_each_steps_processes(distrun_home: Path) -> None:
    layout = Layout(distrun_home)
    planned = plan_pipeline(load_pipeline_file(CHAIN), layout)
    steps = {step["name"]: step for step in planned["steps"]}
    assert list(steps) == ["prepare", "train", "score"]
    assert [steps[s]["level"] for s in steps] == [0, 1, 2]
    assert steps["train"]["reads"] == {"data": "prepare.prepared"}
    train = steps["train"]["rendered"]
    assert train["plan"]["job_name"] == "pipeline.train" == step_job_name("pipeline", "train")
    assert train["plan"]["world_size"] == 4
    prepared = str(layout.job("pipeline.prepare").named_output("prepared"))
    assert train["inputs"]["data"]["local"] == prepared
    assert f"--data {prepared} --epochs 3 --lr 0.5" in train["plan"]["command"]
    text = pipeline_as_text(planned)
    assert "pipeline: pipeline (chain)  steps: 3" in text
    assert "  level 1: train  after prepare  (data <- prepare.prepared; model -> pipeline output final_model)" in text
    assert "=== step train: job pipeline.train, component " in text and "train.yml, 4 processes" in text
    assert "=== step score: job pipeline.score, inline command, 1 process\n" in text
    assert "(output prepared of step prepare, once it completed)" in text
    assert not (distrun_home / "jobs").exists()  # a plan writes nothing


def test_plan_of_a_named_pipeline_names_its_steps_jobs_after_it(distrun_home: Path) -> None:
    pipeline = load_pipeline_file(CHAIN, ["name=nightly"])
    planned = plan_pipeline(pipeline, Layout(distrun_home))
    assert [s["job"] for s in planned["steps"]] == ["nightly.prepare", "nightly.train", "nightly.score"]


def test_every_steps_unknown_compute_is_named_at_once(distrun_home: Path) -> None:
    pipeline = load_pipeline_file(CHAIN, ["settings.default_compute=azureml:cpu-cluster"])
    with pytest.raises(ValidationError) as caught:
        check_pipeline(pipeline, Layout(distrun_home))
    problems = caught.value.problems
    assert [p.key_path for p in problems] == ["settings.default_compute"] * 3
    assert [p.message.split(":")[0] for p in problems] == ["step prepare", "step train", "step score"]
    assert "unknown compute target 'cpu-cluster'" in problems[0].message
    assert problems[0].position is not None and problems[0].position.source.startswith("--set settings.default_compute")
    # --compute runs every step on one target, whatever the steps name.
    targets = check_pipeline(pipeline, Layout(distrun_home), "local")
    assert {name: target.name for name, (target, _) in targets.items()} == dict.fromkeys(pipeline.steps, "local")


# ---------------------------------------------------------------- which steps start


def test_ready_steps_start_together_within_the_machines_cores() -> None:
    from distrun.runner.pipeline_schedule import NOT_STARTED, startable, stopped_by

    fan = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c"), "e": ()}
    waiting = dict.fromkeys(fan, NOT_STARTED)
    sizes = {"a": 2, "b": 2, "c": 2, "d": 1, "e": 1}
    assert startable(fan, waiting, sizes, capacity=4) == ["a", "e"]
    assert startable(fan, waiting, sizes, capacity=2) == ["a"]  # e waits for room
    # a step larger than the machine starts alone
    assert startable({"big": ()}, {"big": NOT_STARTED}, {"big": 16}, capacity=2) == ["big"]
    running = {**waiting, "a": "Completed", "e": "Running"}
    assert startable(fan, running, sizes, capacity=4) == ["b"]  # e holds 1 core: b fits, c waits
    assert startable(fan, running, {**sizes, "b": 0, "c": 0}, capacity=1) == ["b", "c"]  # on a cluster
    assert startable(fan, {**running, "b": "Completed", "c": "Failed"}, sizes, capacity=4) == []
    assert stopped_by("c", fan, {**running, "b": "Completed", "c": "Failed"}) == ["d"]
    assert stopped_by("a", fan, waiting) == ["b", "c", "d"]


def test_steps_asking_for_gpus_start_only_while_they_fit_beside_the_running_ones() -> None:
    from distrun.runner.pipeline_schedule import NOT_STARTED, gpus_for, startable

    # Four independent one-process steps on a 16-core machine with 2 GPUs: cores never hold them back.
    steps = {"train1": (), "train2": (), "cpu": (), "big": ()}
    sizes = dict.fromkeys(steps, 1)
    need = {"train1": 2, "train2": 1, "big": 4}
    waiting = dict.fromkeys(steps, NOT_STARTED)
    assert startable(steps, waiting, sizes, 16, need, gpus=2) == ["train1", "cpu"]  # train1 takes both
    running = {**waiting, "train1": "Running", "cpu": "Running"}
    assert startable(steps, running, sizes, 16, need, gpus=2) == []  # no GPU free: train2 and big wait
    ended = {**running, "train1": "Completed"}
    assert startable(steps, ended, sizes, 16, need, gpus=2) == ["train2"]  # big needs 4 of 2: waits for none running
    assert startable(steps, {**ended, "train2": "Completed"}, sizes, 16, need, gpus=2) == ["big"]  # then alone
    # Without the GPU counts (a machine with no step asking) only cores count, as before.
    assert startable(steps, waiting, sizes, 16) == list(steps)
    # The GPUs a step is given are never a running step's.
    assert gpus_for(2, ("0", "1", "2", "3"), [("1",), ("2",)]) == ("0", "3")
    assert gpus_for(2, ("0", "1"), [("0",)]) == ("1",)  # fewer free than asked: its job says so


def test_a_steps_gpus_are_gpus_per_node_times_its_nodes() -> None:
    from distrun.runner.pipeline_run import gpus_asked
    from distrun.spec import models

    def spec(resources: dict) -> models.JobSpec:
        return models.JobSpec.model_validate({"command": "true", "resources": resources})

    assert gpus_asked(spec({"instance_count": 2, "properties": {"gpus_per_node": "a100:3"}})) == 6
    assert gpus_asked(spec({"instance_count": 2})) == 0
    assert gpus_asked(spec({"properties": {"gpus_per_node": "many"}})) == 0  # its load says what is wrong


# ---------------------------------------------------------------- a pipeline's record, shown


def test_job_show_and_list_of_a_pipeline_record() -> None:
    from distrun.cli.views import job_list_text, job_show_text
    from distrun.store.index import JobRecord

    steps = {
        "a": {
            "job": "p.a",
            "status": "Failed",
            "compute": "local",
            "started_at": 10.0,
            "ended_at": 12.5,
            "reason": "rank 0 on node 0 exited with code 1",
            "depends_on": [],
        },
        "b": {
            "job": "p.b",
            "status": "Canceled",
            "compute": "local",
            "started_at": None,
            "ended_at": None,
            "reason": "not started: step a did not complete",
            "depends_on": ["a"],
        },
    }
    record = JobRecord(
        name="p",
        status="Failed",
        compute="pipeline",
        folder="/tmp/p",
        created_at=10.0,
        started_at=10.0,
        ended_at=13.0,
        reason="step a failed: rank 0 on node 0 exited with code 1",
        root_cause={"step": "a", "job": "p.a", "traceback": "Traceback (most recent call last):\nValueError: x"},
        steps=steps,
    )
    text = job_show_text(record)
    assert "Failed step: a (job p.a)" in text and "ValueError: x" in text
    assert "Compute:" not in text and "Logs:" not in text
    rows = [line.split() for line in text.splitlines() if line.startswith(("a ", "b "))]
    assert rows[0][:5] == ["a", "Failed", "p.a", "local", "2.5s"]
    assert rows[1][:4] == ["b", "Canceled", "p.b", "local"] and "not started" in " ".join(rows[1])
    assert "pipeline (2 steps)" in job_list_text([record], now=20.0)
    child = JobRecord(name="p.a", status="Failed", compute="local", folder="/tmp/p.a", created_at=10.0, parent="p")
    assert "Pipeline: p" in job_show_text(child)
