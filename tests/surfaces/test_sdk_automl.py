"""AutoML jobs built with the SDK as azure-ai-ml builds them: `automl.regression(...)` with its
setters, submitted with `ml_client.jobs.create_or_update` and run for real (FLAML, local compute);
an AutoML node inside an `@pipeline` function, checked as the YAML pipeline is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distrun import Input, MLClient, automl, command
from distrun.dsl import pipeline
from support.automl_data import write_mltable
from support.sdk import sdk_env

__all__ = ["sdk_env"]  # the fixture, imported for pytest


def _machines(count: int) -> list[list[object]]:
    """Rows of (cores, memory, cache, performance): performance grows with cores and memory."""
    return [[c % 7 + 1, 2 ** (c % 5), c % 3, 10 * (c % 7 + 1) + 3 * 2 ** (c % 5) + c % 3] for c in range(count)]


def test_an_sdk_regression_is_submitted_runs_and_gives_its_best_model(
    sdk_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tracking off: the trials' MLflow runs are the local test's; this one is the SDK's submission.
    monkeypatch.setenv("DISTRUN_MLFLOW", "0")
    write_mltable(sdk_env / "train", ["cores", "memory", "cache", "ERP"], _machines(60))
    job = automl.regression(
        training_data=Input(type="mltable", path="./train"),
        target_column_name="ERP",
        primary_metric="r2_score",
        n_cross_validations=2,
        experiment_name="hardware",
    )
    job.set_limits(timeout_minutes=0.05, max_trials=2)
    job.set_training(allowed_training_algorithms=[automl.RegressionModels.LIGHT_GBM, "RandomForest"])
    job.set_featurization(mode="custom", column_name_and_types={"cache": "Categorical"})
    client = MLClient(compute="local")
    returned = client.jobs.create_or_update(job)
    client.jobs.stream(returned.name)
    out = capsys.readouterr().out
    assert "trial 0: " in out and "r2_score=" in out
    folder = Path(os.environ["DISTRUN_HOME"]) / "jobs" / returned.name
    assert (folder / "named-outputs" / "best_model" / "MLmodel").is_file()
    board = json.loads((folder / "named-outputs" / "leaderboard" / "leaderboard.json").read_text())
    assert board["primary_metric"] == "r2_score" and board["best"]["algorithm"] in ("LightGBM", "RandomForest")
    assert client.jobs.get(returned.name).status == "Completed"


def test_an_automl_node_in_a_pipeline_reads_a_step_output_and_passes_its_best_model_on(sdk_env: Path) -> None:
    write_mltable(sdk_env / "train", ["a", "y"], [[1, "no"], [2, "yes"]])
    prep = command(
        command="cp -r ${{inputs.raw}}/. ${{outputs.table}}",
        inputs={"raw": Input(type="mltable")},
        outputs={"table": {"type": "mltable"}},
    )
    score = command(command="ls ${{inputs.model}}", inputs={"model": Input(type="mlflow_model")})

    @pipeline()
    def train_and_score(raw: Input) -> None:
        prepared = prep(raw=raw)
        search = automl.classification(
            training_data=prepared.outputs.table, target_column_name="y", primary_metric="AUC_weighted"
        )
        search.set_limits(max_trials=2)
        score(model=search.outputs.best_model)

    built = train_and_score(raw=Input(type="mltable", path="./train"))
    assert MLClient(compute="local").jobs.validate(built).passed
    wrong = automl.classification(target_column_name="y", primary_metric="r2_score")
    result = MLClient(compute="local").jobs.validate(wrong)
    assert not result.passed and set(result.error_messages) == {"training_data", "primary_metric"}
