"""A substituted value never becomes shell syntax and reaches the program as exactly its text,
in every quoting context the command puts it in: bare, inside the command's own "double" or
'single' quotes, $'...', here-documents. Through a literal input, a sweep's search-space value
and a value output one pipeline step writes and the next step reads."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrun.core.errors import DistrunError
from distrun.spec.command_template import render_command

EXAMPLES = int(os.environ.get("DISTRUN_FUZZ_EXAMPLES", "300"))

# Each command prints the value between the brackets, whatever quoting holds the reference.
CONTEXTS = {
    "bare": "printf '[%s]' ${{inputs.v}}",
    "double quotes": 'printf "[%s]" "got ${{inputs.v}} here"',
    "single quotes": "printf '[%s]' 'got ${{inputs.v}} here'",
    "ansi-c quotes": "printf '[%s]' $'got ${{inputs.v}} here'",
    "inside $( ) in double quotes": 'printf "[%s]" "$(printf %s "got ${{inputs.v}} here")"',
    "here-document": "cat <<EOF\n[got ${{inputs.v}} here]\nEOF",
    "quoted here-document": "cat <<'EOF'\n[got ${{inputs.v}} here]\nEOF",
}
EXPECTED = {
    "bare": "[{v}]",
    "here-document": "[got {v} here]\n",
    "quoted here-document": "[got {v} here]\n",
}
_LINE_CONTEXTS = {"here-document", "quoted here-document"}  # a newline there could end the document

text_without_nul = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)


def _shown(command: str, value: str, cwd) -> str:
    rendered = render_command(command, {"v": value}, {})
    done = subprocess.run(["bash", "-c", rendered], capture_output=True, timeout=10, cwd=cwd)
    assert done.returncode == 0, (rendered, done.stderr)
    return done.stdout.decode()


@settings(max_examples=EXAMPLES, deadline=None)
@given(value=text_without_nul)
def test_any_value_reaches_the_program_as_its_text_in_every_quoting_context(value: str, tmp_path_factory) -> None:
    cwd = tmp_path_factory.mktemp("shell")
    for name, command in CONTEXTS.items():
        if name in _LINE_CONTEXTS and "\n" in value:
            with pytest.raises(DistrunError, match="here-document"):
                render_command(command, {"v": value}, {})
            continue
        if name == "inside $( ) in double quotes":
            expected = f"[got {value} here]"
        else:
            expected = EXPECTED.get(name, "[got {v} here]").format(v=value)
        assert _shown(command, value, cwd) == expected, name
    assert list(cwd.iterdir()) == []  # nothing the value said was run


@pytest.mark.parametrize(
    ("context", "hostile"),
    [
        ("# note ${{inputs.v}}", "x\ntouch {pwned}"),
        ("echo `echo ${{inputs.v}}`", "$(touch {pwned})"),
        ("echo $(( ${{inputs.v}} + 1 ))", "a[$(touch {pwned})]"),
    ],
)
def test_a_value_where_the_shell_rereads_it_is_refused_unless_a_plain_word(
    context: str, hostile: str, tmp_path
) -> None:
    with pytest.raises(DistrunError, match="where the shell would read it as code") as refused:
        render_command(context, {"v": hostile.format(pwned=tmp_path / "pwned")}, {})
    assert "hint:" in refused.value.render()
    assert render_command(context, {"v": "12"}, {}) == context.replace("${{inputs.v}}", "12")
    assert not (tmp_path / "pwned").exists()


SHOW = "import json, sys\nprint('ARGV ' + json.dumps(sys.argv[1:]))\n"


def _argv(stdout: str) -> list[str]:
    line = next(x for x in stdout.splitlines() if "ARGV " in x)
    return json.loads(line.split("ARGV ", 1)[1])


def test_a_literal_input_in_the_commands_own_quotes_reaches_the_program_as_its_text(run_cli, write_job, tmp_path):
    pwned = tmp_path / "pwned"
    hostile = f'$(touch {pwned}) `touch {pwned}` "q" it\'s'
    job = write_job(
        """
        command: python show.py "got ${{inputs.x}}" 'got ${{inputs.x}}' --pattern "${{inputs.p}}" ${{inputs.x}}
        code: src
        inputs:
          x: placeholder
          p: (.*)\\.jpg
        """,
        {"show.py": SHOW},
    )
    result = run_cli("run", str(job), "--set", f"inputs.x={json.dumps(hostile)}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _argv(result.stdout) == [f"got {hostile}", f"got {hostile}", "--pattern", r"(.*)\.jpg", hostile]
    assert not pwned.exists()


def test_a_sweep_value_in_double_quotes_is_never_run(run_cli, tmp_path):
    pwned = tmp_path / "pwned"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "show.py").write_text(SHOW)
    sweep = tmp_path / "sweep.yml"
    hostile = f"$(touch {pwned})"
    sweep.write_text(
        "type: sweep\n"
        "trial:\n"
        '  command: python show.py "lr=${{search_space.lr}}"\n'
        "  code: src\n"
        "search_space:\n"
        f"  lr: {{type: choice, values: [{json.dumps(hostile)}]}}\n"
        "sampling_algorithm: grid\n"
        "objective: {goal: maximize, primary_metric: acc}\n"
        "limits: {max_total_trials: 1}\n"
    )
    result = run_cli("run", str(sweep), "--name", "sw")
    assert not pwned.exists(), result.stdout + result.stderr
    trial_log = tmp_path / "home" / "jobs" / "sw.trial_0" / "user_logs" / "std_log_process_00.txt"
    assert _argv(trial_log.read_text()) == [f"lr={hostile}"]


def test_a_value_output_one_step_writes_never_runs_in_the_next_steps_job(run_cli, tmp_path):
    pwned = tmp_path / "pwned"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "show.py").write_text(SHOW)
    hostile = f'x" $(touch {pwned}) "`touch {pwned}`'
    (tmp_path / "src" / "write.py").write_text(f"import sys\nopen(sys.argv[1], 'w').write({hostile!r})\n")
    (tmp_path / "write.yml").write_text(
        "type: command\n"
        "name: writer\n"
        "version: 1\n"
        "code: ./src\n"
        "outputs: {v: {type: string}}\n"
        "command: python write.py ${{outputs.v}}\n"
    )
    (tmp_path / "read.yml").write_text(
        "type: command\n"
        "name: reader\n"
        "version: 1\n"
        "code: ./src\n"
        "inputs: {v: {type: string}}\n"
        'command: python show.py "got ${{inputs.v}}"\n'
    )
    pipeline = tmp_path / "pipeline.yml"
    pipeline.write_text(
        "type: pipeline\n"
        "settings: {default_compute: local}\n"
        "jobs:\n"
        "  write: {type: command, component: ./write.yml}\n"
        "  read:\n"
        "    type: command\n"
        "    component: ./read.yml\n"
        "    inputs: {v: '${{parent.jobs.write.outputs.v}}'}\n"
    )
    result = run_cli("run", str(pipeline), "--name", "pipe")
    assert result.returncode == 0, result.stdout + result.stderr
    read_log = tmp_path / "home" / "jobs" / "pipe.read" / "user_logs" / "std_log_process_00.txt"
    assert _argv(read_log.read_text()) == [f"got {hostile}"]
    assert not pwned.exists()


def test_a_literal_the_shell_would_reread_is_a_file_line_error_before_anything_is_recorded(
    run_cli, write_job, distrun_home, tmp_path
):
    pwned = tmp_path / "pwned"
    job = write_job(f"command: echo $(( ${{{{inputs.n}}}} + 1 ))\ninputs:\n  n: {json.dumps(f'a[$(touch {pwned})]')}\n")
    result = run_cli("run", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{job}:1:1: command: the value of inputs.n" in result.stderr
    assert "stands inside an arithmetic expression" in result.stderr and "hint: put the reference" in result.stderr
    assert not (distrun_home / "jobs").exists() or not any((distrun_home / "jobs").iterdir())
    assert not pwned.exists()
    fine = run_cli("run", str(job), "--set", "inputs.n=4")
    assert fine.returncode == 0 and "[0/0] 5" in fine.stdout, fine.stdout + fine.stderr
