"""A sweep node of an `@pipeline` function runs for real on local compute: a component called with
a search space, `.sweep(...)`, and a later step reading the sweep node's output (its best
trial's), submitted, streamed and read back with `MLClient.jobs`, through the runner a pipeline
file's sweep step runs on. The trial logs its metric without an MLflow import
(tests/support/sweep_trial.py); the first trial makes the store (an mlflow import, seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun import Input, MLClient, Output, command, load_component
from distrun.dsl import pipeline
from distrun.sweep import Choice
from support.sdk import sdk_env, write
from support.sweep_trial import COMPONENT, TRAIN

__all__ = ["sdk_env"]  # the fixture, imported for pytest

# The first trial makes the MLflow store (an mlflow import, seconds).
pytestmark = pytest.mark.slow


def test_a_later_step_of_an_sdk_pipeline_reads_its_sweep_nodes_best_trial(
    sdk_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{sdk_env / 'mlflow.db'}")
    write(sdk_env / "src" / "train.py", TRAIN)
    write(sdk_env / "train.yml", COMPONENT)
    write(sdk_env / "data" / "base.txt", "iris\n")
    train = load_component(source="./train.yml")
    read = command(
        command="cp ${{inputs.model}}/model.txt ${{outputs.read}}/read.txt",
        inputs={"model": Input(type="uri_folder")},
        outputs={"read": Output(type="uri_folder")},
    )

    @pipeline()
    def tune(raw):
        train_model = train(data=raw, x=Choice([1, 2]))
        sweep_step = train_model.sweep(primary_metric="loss", goal="minimize", sampling_algorithm="grid")
        sweep_step.set_limits(max_total_trials=2, max_concurrent_trials=2)
        use = read(model=sweep_step.outputs.model)  # noqa: F841 (its variable names the step)

    job = tune(raw=Input(type="uri_folder", path="./data"))
    job.settings.default_compute = "local"
    client = MLClient()
    name = client.jobs.create_or_update(job).name
    client.jobs.stream(name)
    out = capsys.readouterr().out
    assert f"[sweep_step] Completed (job {name}.sweep_step)" in out and f"[use] Completed (job {name}.use)" in out
    swept = client.jobs.get(f"{name}.sweep_step")
    assert swept.status == "Completed" and swept.properties["best_child_run_id"] == f"{name}.sweep_step.trial_1"

    done = client.jobs.get(name)
    assert done.status == "Completed" and list(done.jobs) == ["sweep_step", "use"]
    assert [step.status for step in done.jobs.values()] == ["Completed", "Completed"]
    # x=2 minimizes |x - 2|: the later step read trial_1's model, not the first trial's.
    folder = client.layout.job(f"{name}.use").named_output("read")
    assert (folder / "read.txt").read_text() == "x=2 base=iris"
