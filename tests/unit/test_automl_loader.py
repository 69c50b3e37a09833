"""AutoML jobs (`type: automl`) load into the command job that runs their search: Azure ML's
settings checked with file:line, key path and hint; image and NLP tasks refused in one line;
Azure's algorithm and metric names in FLAML's words; what distrun cannot honour said once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from distrun.core.errors import DistrunError, ValidationError
from distrun.loading.documents import load_document_file
from distrun.spec.automl_models import SETTINGS_VARIABLE, AutoMLJob
from distrun.spec.automl_names import azure_name, estimators, metric, primary_metric
from distrun.spec.automl_notes import setting_notes

# Microsoft's bank-marketing classification job, but for the compute.
BANK = """\
$schema: https://azuremlsdk2.blob.core.windows.net/preview/0.0.1/autoMLJob.schema.json
type: automl
experiment_name: dpv2-cli-automl-classifier-experiment
task: classification
log_verbosity: debug
primary_metric: accuracy
target_column_name: "y"
training_data:
  path: "./training-mltable-folder"
  type: mltable
validation_data:
  path: "./validation-mltable-folder"
  type: mltable
limits:
  timeout_minutes: 180
  max_trials: 40
  trial_timeout_minutes: 20
  enable_early_termination: true
  exit_score: 0.92
featurization:
  mode: custom
  transformer_params:
    imputer:
      - fields: ["job"]
        parameters:
          strategy: most_frequent
  blocked_transformers:
    - WordEmbedding
training:
  enable_model_explainability: true
  allowed_training_algorithms:
    - gradient_boosting
    - logistic_regression
"""


def _folder(tmp_path: Path, text: str) -> Path:
    for name in ("training-mltable-folder", "validation-mltable-folder"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "MLTable").write_text("paths:\n  - file: ./t.csv\n", encoding="utf-8")
    path = tmp_path / "job.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_automl_job_runs_its_search_as_a_command_job_with_its_data_and_best_model(tmp_path: Path) -> None:
    loaded = load_document_file(_folder(tmp_path, BANK))
    spec = loaded.spec
    assert "-m distrun.automl_search" in spec.command and "${{outputs.best_model}}" in spec.command
    assert {name: value.type for name, value in spec.inputs.items()} == {
        "training_data": "mltable",
        "validation_data": "mltable",
    }
    assert spec.outputs["best_model"].type == "mlflow_model"
    assert spec.experiment_name == "dpv2-cli-automl-classifier-experiment"
    assert spec.limits.timeout == 180 * 60 + 120  # the search's budget, and the time to save its model
    settings = AutoMLJob.model_validate(json.loads(spec.environment_variables[SETTINGS_VARIABLE]))
    assert settings.limits.exit_score == 0.92 and settings.training.allowed_training_algorithms == [
        "gradient_boosting",
        "logistic_regression",
    ]


def test_an_automl_job_is_recorded_shown_and_planned_as_an_automl_job(tmp_path: Path) -> None:
    from distrun.core.job_kind import JobKind
    from distrun.plan.text import plan_as_text
    from distrun.runner.job_kinds import row_of_document
    from distrun.store.layout import Layout

    loaded = load_document_file(_folder(tmp_path, BANK))
    row = row_of_document(loaded)
    # Its search is one process: run, logged and canceled as a command job, named as an AutoML job.
    assert loaded.kind is JobKind.AUTOML and row.view == "automl" and not row.has_children
    planned = row.plan(loaded, Layout(tmp_path / "home"), None)
    text = row.plan_text(planned)
    # `distrun plan` says the settings it cannot honour exactly, as the search says them when it runs.
    settings = AutoMLJob.model_validate(json.loads(loaded.spec.environment_variables[SETTINGS_VARIABLE]))
    for note in setting_notes(settings):
        assert f"note: {note}" in text
    assert "note: model explanations are not computed (enable_model_explainability)" in text
    assert plan_as_text(planned) == text


def test_image_and_nlp_tasks_are_refused_in_one_line(tmp_path: Path) -> None:
    text = BANK.replace("task: classification", "task: image_object_detection")
    with pytest.raises(ValidationError) as caught:
        load_document_file(_folder(tmp_path, text))
    (problem,) = caught.value.problems
    assert "image task" in problem.message and problem.key_path == "task" and problem.position.line == 4
    assert "GPUs" in problem.hint


def test_wrong_settings_are_said_with_their_key_line_and_hint(tmp_path: Path) -> None:
    text = BANK.replace("max_trials: 40", "max_trialz: 40").replace(
        "primary_metric: accuracy", "primary_metric: r2_score"
    )
    with pytest.raises(ValidationError) as caught:
        load_document_file(_folder(tmp_path, text))
    keys = {problem.key_path: problem for problem in caught.value.problems}
    assert "limits.max_trialz" in keys and keys["limits.max_trialz"].position.line == 16
    text = BANK.replace("primary_metric: accuracy", "primary_metric: r2_score")
    with pytest.raises(ValidationError) as caught:
        load_document_file(_folder(tmp_path, text))
    (problem,) = caught.value.problems
    assert problem.key_path == "primary_metric" and "AUC_weighted" in problem.message


def test_a_forecasting_job_needs_its_forecasting_settings(tmp_path: Path) -> None:
    text = BANK.replace("task: classification", "task: forecasting").replace("accuracy", "r2_score")
    with pytest.raises(ValidationError) as caught:
        load_document_file(_folder(tmp_path, text))
    assert "task" in [p.key_path for p in caught.value.problems]


def test_azure_algorithm_names_map_to_flaml_estimators_and_the_rest_is_said_once() -> None:
    job = AutoMLJob.model_validate(
        {
            "task": "regression",
            "target_column_name": "ERP",
            "training_data": {"path": "t", "type": "mltable"},
            "training": {
                "allowed_training_algorithms": ["light_gbm", "XGBoostRegressor", "decision_tree", "gradient_boosting"],
                "blocked_training_algorithms": ["XGBoostRegressor"],
                "enable_stack_ensemble": True,
            },
            "featurization": {"mode": "custom", "blocked_transformers": ["LabelEncoder"]},
        }
    )
    chosen, said = estimators(job)
    assert chosen == ["lgbm", "histgb"]
    assert any("decision_tree" in line and "no FLAML equivalent" in line for line in said)
    assert any("gradient_boosting" in line and "histogram" in line for line in said)
    notes = setting_notes(job)
    assert any("ensembles" in line for line in notes) and any("blocked_transformers" in line for line in notes)
    assert len(notes) == len(set(notes))
    assert primary_metric(job).azure == "normalized_root_mean_squared_error"
    # azure-ai-ml's notebooks name metrics as its enums do.
    assert metric("R2Score").azure == "r2_score" and metric("AUCWeighted").azure == "AUC_weighted"
    assert azure_name("xgboost", "regression") == "XGBoostRegressor" and azure_name("lgbm", "regression") == "LightGBM"


class _NoFlaml:
    """An import finder that finds no `flaml`, as in a Python without it."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "flaml" or name.startswith("flaml."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_without_flaml_the_job_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As where it is not installed: not imported, and not found by any import.
    for name in [name for name in sys.modules if name == "flaml" or name.startswith("flaml.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoFlaml(), *sys.meta_path])
    with pytest.raises(DistrunError) as caught:
        load_document_file(_folder(tmp_path, BANK))
    assert caught.value.hint == "pip install 'distrun[automl]'"


PIPELINE = """\
type: pipeline
inputs:
  raw: {type: mltable, path: ./training-mltable-folder}
jobs:
  prep:
    type: command
    command: cp -r ${{inputs.raw}}/. ${{outputs.table}}
    inputs: {raw: "${{parent.inputs.raw}}"}
    outputs: {table: {type: mltable}}
  classify:
    type: automl
    task: classification
    primary_metric: accuracy
    target_column_name: "y"
    training_data: ${{parent.jobs.prep.outputs.table}}
    limits: {max_trials: 2}
    outputs:
      best_model: {type: mlflow_model}
  score:
    type: command
    command: ls ${{inputs.model}}
    inputs: {model: "${{parent.jobs.classify.outputs.best_model}}"}
"""


def test_an_automl_step_of_a_pipeline_reads_another_steps_output_and_gives_its_best_model(tmp_path: Path) -> None:
    loaded = load_document_file(_folder(tmp_path, PIPELINE))
    step = loaded.steps["classify"]
    assert "-m distrun.automl_search" in step.document["command"]
    assert step.depends_on == ("prep",) and loaded.steps["score"].depends_on == ("classify",)
    assert step.upstream["training_data"].step == "prep" and step.upstream["training_data"].output == "table"
    # The step's job, loaded as a run loads it once its data is bound, is recorded as an AutoML job.
    from distrun.core.job_kind import JobKind
    from distrun.loading.loader import load_job_data

    document = {**step.document, "inputs": {"training_data": {"type": "mltable", "path": "./training-mltable-folder"}}}
    assert load_job_data(document, tmp_path).kind is JobKind.AUTOML
    assert load_job_data(loaded.steps["prep"].document, tmp_path, "<p>").kind is JobKind.COMMAND


def test_an_automl_steps_wrong_setting_is_said_at_its_key_in_the_pipeline(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_document_file(_folder(tmp_path, PIPELINE.replace("max_trials: 2", "max_trialz: 2")))
    (problem,) = caught.value.problems
    assert problem.key_path == "jobs.classify.limits.max_trialz" and problem.position.line == 16


def test_a_job_whose_algorithms_have_no_flaml_equivalent_is_refused_naming_them(tmp_path: Path) -> None:
    text = BANK.replace("    - gradient_boosting\n    - logistic_regression", "    - TCNForecaster")
    with pytest.raises(ValidationError) as caught:
        load_document_file(_folder(tmp_path, text))
    (problem,) = caught.value.problems
    assert problem.key_path == "training.allowed_training_algorithms" and "TCNForecaster" in problem.hint


def test_cloud_settings_are_accepted_and_said_once_as_not_used(tmp_path: Path) -> None:
    # Microsoft's serverless bank-marketing job writes its resources as text.
    text = BANK + 'resources:\n  instance_type="Standard_E4s_v3"\n  instance_count=5\n'
    loaded = load_document_file(_folder(tmp_path, text))
    job = AutoMLJob.model_validate(json.loads(loaded.spec.environment_variables[SETTINGS_VARIABLE]))
    assert [line for line in setting_notes(job) if line.startswith("resources")] == [
        "resources is an Azure ML cloud setting: not used"
    ]


def test_max_concurrent_trials_is_honoured_in_a_ray_cluster_and_said_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    from distrun.automl_search.search import on_ray_cluster

    job = AutoMLJob.model_validate(
        {"task": "regression", "target_column_name": "y", "training_data": {"path": ".", "type": "mltable"},
         "limits": {"max_concurrent_trials": 2}}
    )  # fmt: skip
    monkeypatch.delenv("DISTRUN_RAY_CLUSTER", raising=False)
    assert not on_ray_cluster(job)
    assert any(note.startswith("max_concurrent_trials: trials run one at a time") for note in setting_notes(job))
    monkeypatch.setenv("DISTRUN_RAY_CLUSTER", "10.0.0.1:6379")
    assert on_ray_cluster(job)
    assert not any("max_concurrent_trials" in note for note in setting_notes(job, on_ray_cluster=True))
