"""Sweep jobs load as command jobs do: the trial a command job document, every problem of the
sweep, its search space, algorithm, policy and trial in one round, each with its position and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.documents import load_document_file
from distrun.loading.loader import load_job_file
from distrun.spec.loaded_sweep import LoadedSweep

HELLO = """\
$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
type: sweep
trial:
  command: >-
    python hello.py --A ${{inputs.A}} --B ${{search_space.B}} --C ${{search_space.C}}
  code: src
  environment: azureml:AzureML-sklearn-1.5@latest
inputs:
  A: 0.5
sampling_algorithm: random
search_space:
  B: {type: choice, values: ["hello", "world"]}
  C: {type: uniform, min_value: 0.1, max_value: 1.0}
objective:
  goal: minimize
  primary_metric: random_metric
limits:
  max_total_trials: 4
  max_concurrent_trials: 2
  trial_timeout: 60
experiment_name: hello
"""


def _write(tmp_path: Path, text: str, name: str = "sweep.yml") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        load_document_file(path)
    return [p.render() for p in caught.value.problems]


def test_microsofts_hello_sweep_loads_with_its_trial_as_a_command_job(tmp_path: Path, distrun_home: Path) -> None:
    sweep = load_document_file(_write(tmp_path, HELLO))
    assert isinstance(sweep, LoadedSweep)
    assert sweep.trial == {
        "command": "python hello.py --A ${{inputs.A}} --B ${{inputs.B}} --C ${{inputs.C}}",
        "code": "src",
        "environment": "azureml:AzureML-sklearn-1.5@latest",
        "inputs": {"A": 0.5},
        "experiment_name": "hello",
        "limits": {"timeout": 60},
    }
    assert sweep.trial_document({"B": "world", "C": 0.25})["inputs"] == {"A": 0.5, "B": "world", "C": 0.25}
    assert list(sweep.search_space) == ["B", "C"]
    assert (sweep.algorithm.type, sweep.algorithm.seed, sweep.policy) == ("random", None, None)
    assert (sweep.spec.objective.goal, sweep.spec.objective.primary_metric) == ("minimize", "random_metric")
    assert (sweep.spec.limits.max_total_trials, sweep.spec.limits.max_concurrent_trials) == (4, 2)


def test_every_expression_and_policy_loads_with_azures_parameter_names(tmp_path: Path, distrun_home: Path) -> None:
    text = HELLO.replace(
        "  C: {type: uniform, min_value: 0.1, max_value: 1.0}\n",
        "  C: {type: uniform, min_value: 0.1, max_value: 1.0}\n"
        "  d: {type: randint, upper: 5}\n"
        "  e: {type: quniform, min_value: 1, max_value: 9, q: 2}\n"
        "  f: {type: loguniform, min_value: -3, max_value: 0}\n"
        "  g: {type: qloguniform, min_value: 0, max_value: 3, q: 1}\n"
        "  h: {type: normal, mu: 0, sigma: 1}\n"
        "  i: {type: qnormal, mu: 10, sigma: 2, q: 1}\n"
        "  j: {type: lognormal, mu: 0, sigma: 0.5}\n"
        "  k: {type: qlognormal, mu: 1, sigma: 0.5, q: 0.5}\n",
    ).replace(
        "sampling_algorithm: random\n",
        "sampling_algorithm: {type: random, seed: 7, rule: sobol}\n"
        "early_termination: {type: truncation_selection, truncation_percentage: 20, evaluation_interval: 2,"
        " delay_evaluation: 3}\n",
    )
    sweep = load_document_file(_write(tmp_path, text))
    assert isinstance(sweep, LoadedSweep)
    assert [e.type for e in sweep.search_space.values()] == [
        "choice",
        "uniform",
        "randint",
        "quniform",
        "loguniform",
        "qloguniform",
        "normal",
        "qnormal",
        "lognormal",
        "qlognormal",
    ]
    assert (sweep.algorithm.seed, sweep.algorithm.rule) == (7, "sobol")
    assert (sweep.policy.type, sweep.policy.truncation_percentage, sweep.policy.interval) == (
        "truncation_selection",
        20,
        2,
    )


def test_every_problem_is_said_at_once_with_where_and_how(tmp_path: Path, distrun_home: Path) -> None:
    path = _write(
        tmp_path,
        """\
type: sweep
trial:
  command: python x.py --lr ${{search_space.lrr}} --k ${{search_space.k}}
  code: src
  inputs: {a: 1}
  resourcs: {instance_count: 1}
search_space:
  lr: {type: uniform, min_value: 0.1, max_value: 0.01}
  k: {type: choise, values: [1, 2]}
  m: {type: normal, mu: 0}
objective:
  goal: maximise
  primary_metric: acc
early_termination:
  type: bandit
  slack_factor: 0.1
  slack_amount: 0.2
limits:
  max_totl_trials: 3
""",
    )
    where = str(path)
    assert _problems(path) == [
        f"{where}:3:3: trial.command: ${{{{search_space.lrr}}}} refers to an undefined search space parameter "
        "'lrr'\n    hint: did you mean search_space.lr? add `lrr` under `search_space:`",
        f"{where}:5:3: trial.inputs: a trial does not take `inputs`: the sweep's `inputs` is its trials'\n"
        "    hint: move `inputs` to the sweep's top level",
        f"{where}:6:3: trial.resourcs: unknown key 'resourcs'\n    hint: did you mean 'resources'?",
        f"{where}:8:3: search_space.lr: min_value 0.1 is above max_value 0.01\n"
        "    hint: min_value is the lower bound: swap the two",
        f"{where}:9:7: search_space.k.type: unknown expression type 'choise'\n    hint: did you mean 'choice'? use "
        "one of choice, randint, uniform, quniform, loguniform, qloguniform, normal, qnormal, lognormal, qlognormal",
        f"{where}:10:3: search_space.m.sigma: `sigma` is required\n    hint: add `sigma:`",
        f"{where}:12:3: objective.goal: expected one of maximize, minimize; got 'maximise'\n"
        "    hint: did you mean 'maximize'? use one of maximize, minimize",
        f"{where}:14:1: early_termination: a bandit policy takes one of slack_factor and slack_amount\n"
        "    hint: slack_factor is a ratio to the best trial (0.1: within 10%), slack_amount a distance in the "
        "metric's units: keep one",
        f"{where}:19:3: limits.max_totl_trials: unknown key 'max_totl_trials'\n    hint: did you mean "
        "'max_total_trials'?",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("sampling_algorithm: random", "sampling_algorithm: grid"),
            "search_space.C.type: grid sampling cannot sample a uniform expression: it enumerates discrete values "
            "(choice)",
        ),
        (
            ("sampling_algorithm: random", "sampling_algorithm: bayesian\nearly_termination: {type: median_stopping}"),
            "early_termination: bayesian sampling takes no early termination policy",
        ),
        (
            ("C: {type: uniform,", "C: {type: normal, mu: 0, sigma: 1}\n  X: {type: uniform,"),
            "",
        ),
        (("  A: 0.5", "  A: 0.5\n  B: 3"), "inputs.B: 'B' is both an input and a search space parameter"),
        (("sampling_algorithm: random", "sampling_algorithm: sobol"), "sampling_algorithm.type: unknown sampling"),
        (("trial_timeout: 60", "trial_timeout: -1"), "limits.trial_timeout: must be more than 0"),
        (("code: src", "code: nowhere"), "trial.code:"),
    ],
)
def test_what_azure_refuses_is_refused_saying_why(
    tmp_path: Path, distrun_home: Path, change: tuple[str, str], expected: str
) -> None:
    text = HELLO.replace(*change)
    if not expected:  # bayesian with a normal expression
        text = text.replace("sampling_algorithm: random", "sampling_algorithm: bayesian")
        expected = "search_space.C.type: bayesian sampling cannot sample a normal expression"
    found = _problems(_write(tmp_path, text))
    assert any(expected in line for line in found), found


def test_a_component_trial_gets_the_sweeps_inputs_and_parameters(tmp_path: Path, distrun_home: Path) -> None:
    (tmp_path / "train.yml").write_text(
        "type: command\ncommand: python t.py --lr ${{inputs.lr}} --n ${{inputs.n}} --d ${{inputs.d}}\n"
        "code: ./src\ninputs:\n  lr: {type: number}\n  n: {type: integer}\n  d: {type: string, default: x}\n",
        encoding="utf-8",
    )
    text = (
        "type: sweep\ntrial: ./train.yml\ninputs: {n: 3}\nsearch_space:\n  lr: {type: choice, values: [0.1]}\n"
        "objective: {goal: maximize, primary_metric: acc}\n"
    )
    sweep = load_document_file(_write(tmp_path, text))
    assert isinstance(sweep, LoadedSweep)
    assert sweep.trial["command"] == "python t.py --lr ${{inputs.lr}} --n ${{inputs.n}} --d ${{inputs.d}}"
    assert sweep.trial["code"] == str(tmp_path / "src")
    assert sweep.trial["inputs"] == {"n": 3, "d": "x"}
    assert sweep.trial_base_dir == tmp_path
    bad = _write(tmp_path, text.replace("lr: {type", "rate: {type"), "bad.yml")
    assert any("search_space.rate: search space parameter 'rate' is not an input" in p for p in _problems(bad))


def test_a_sweep_given_where_a_command_job_is_expected_says_what_to_run(tmp_path: Path, distrun_home: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_job_file(_write(tmp_path, HELLO))
    assert "this file is a sweep job, not a command job" in caught.value.render()
    assert "`distrun run FILE` runs a sweep" in caught.value.render()
