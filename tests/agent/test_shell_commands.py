"""distrun's generated shell, run by bash as a node runs it: GPU binding under mpirun, quoting of
literal inputs and overrides (no injection), and variables left for each process to expand."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.plan.common import rendered_command
from distrun.plan.model import Bindings
from distrun.plan.plan_job import PlanJob
from distrun.sdk.v1 import shell_word
from distrun.spec import models
from distrun.spec.command_template import render_command, render_value
from support.gpu_plans import job, plan
from support.job_files import load_text


def _literal_bindings(spec: models.JobSpec, outputs: dict[str, str]) -> Bindings:
    """What a backend gives the planner: literal inputs rendered as text."""
    inputs = {}
    for name, value in spec.inputs.items():
        raw = value.value if isinstance(value, models.LiteralInput) else value
        inputs[name] = render_value(raw)
    return Bindings(inputs=inputs, outputs=outputs)


INJECTIONS = [
    "x; touch {pwned}",
    "$(touch {pwned})",
    "`touch {pwned}`",
    "a' ; touch {pwned}; echo '",
    'a" ; touch {pwned}; echo "',
    "line one\ntouch {pwned}",
    "&& touch {pwned} ||",
    "| touch {pwned}",
    "> {pwned}",
    "*",
    "$HOME ~ {{a,b}}",
    "",
]


def test_mpi_ranks_bind_to_their_nodes_slice_through_their_world_rank() -> None:
    launch = plan(job("mpi", 2, 2))
    launcher = launch.nodes[0].processes[0]
    assert launcher.argv[:2] == ("mpirun", "-np")
    script = launcher.argv[-1]
    assert script.endswith("python train.py")
    assert [node.gpus for node in launch.nodes] == [("0", "1", "2", "3"), ("4", "5", "6", "7")]
    # Run the binding as each of the 4 ranks would under mpirun (rank r on node r // 2).
    for rank, expected in enumerate(["0,1,2,3", "0,1,2,3", "4,5,6,7", "4,5,6,7"]):
        binding = script.removesuffix("python train.py")
        shown = subprocess.run(
            ["bash", "-c", binding + 'echo "$CUDA_VISIBLE_DEVICES"'],
            env={"OMPI_COMM_WORLD_RANK": str(rank), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        assert shown.stdout.strip() == expected


def test_shell_variables_are_left_for_each_process_to_expand() -> None:
    rendered = render_command("echo $RANK ${NODE_RANK} ${{inputs.x}}", {"x": "a b"}, {})
    assert rendered == "echo $RANK ${NODE_RANK} 'a b'"
    out = subprocess.run(
        ["bash", "-c", rendered], env={"RANK": "3", "NODE_RANK": "1"}, capture_output=True, text=True, check=True
    )
    assert out.stdout == "3 1 a b\n"


@pytest.mark.parametrize("payload", INJECTIONS)
def test_literal_inputs_reach_the_program_as_one_argument(tmp_path: Path, payload: str) -> None:
    pwned = tmp_path / "pwned"
    message = payload.format(pwned=pwned)
    printer = f"{shlex.quote(sys.executable)} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    command = printer + " ${{inputs.msg}} --n ${{inputs.n}} --flag ${{inputs.flag}} ${{outputs.model}}"
    text = (
        f"command: {json.dumps(command)}\n"
        f"inputs:\n  msg: {json.dumps(message)}\n  n: 2\n  flag:\n    value: true\n"
        "outputs:\n  model:\n"
    )
    spec = load_text(tmp_path, text).spec
    assert spec.inputs["msg"] == message
    model_dir = tmp_path / "out dir; touch x"
    rendered = rendered_command(PlanJob.of(spec), _literal_bindings(spec, {"model": str(model_dir)}))
    out = subprocess.run(["bash", "-c", rendered], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [message, "--n", "2", "--flag", "True", str(model_dir)]
    assert not pwned.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yml", "src"]


def test_injection_through_an_override_is_quoted_too(tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    printer = f"{shlex.quote(sys.executable)} -c 'import sys; print(sys.argv[1])'"
    command = printer + " ${{inputs.msg}}"
    job = load_text(tmp_path, f"command: {json.dumps(command)}\n", [f"inputs.msg=x; touch {pwned}"])
    rendered = rendered_command(PlanJob.of(job.spec), _literal_bindings(job.spec, {}))
    out = subprocess.run(["bash", "-c", rendered], capture_output=True, text=True, check=True)
    assert out.stdout == f"x; touch {pwned}\n"
    assert not pwned.exists()


@pytest.mark.parametrize(
    "value, expected",
    [
        (25, "25"),
        ("two words", "two words"),
        ("$LOCAL_RANK", "3"),
        ("rank=${RANK}!", "rank=7!"),
        ('it\'s $(touch pwned) `x` "q" \\ $1', 'it\'s $(touch pwned) `x` "q" \\ $1'),
        ("$LOCAL_RANK; rm x", "3; rm x"),
    ],
)
def test_v1_arguments_expand_variables_only(tmp_path, value, expected):
    word = shell_word(value)
    result = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {word}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"LOCAL_RANK": "3", "RANK": "7", "PATH": "/usr/bin:/bin"},
    )
    assert result.stdout == expected + "\n"
    assert not (tmp_path / "pwned").exists()
