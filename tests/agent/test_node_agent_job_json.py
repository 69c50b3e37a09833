"""The node agent as a process, given a job.json changed after submission: it names the change and
ends without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from support.jobs import prepare_local_job

ONE_ECHO = {"command": "echo one", "limits": {"grace_period": 2.5}}


def test_the_node_agent_names_a_changed_job_json_and_ends_without_a_traceback(
    write_job, distrun_home: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from distrun.agent.node import EXIT_NO_JOB
    from support.cli import cli_env
    from support.jobs import one_node_facts

    folder = prepare_local_job(write_job(json.dumps(ONE_ECHO)), "changed").folder.root
    data = json.loads((folder / "job.json").read_text())
    data["resources"] = {"instance_count": "many"}
    (folder / "job.json").write_text(json.dumps(data))
    facts = one_node_facts(folder, tmp_path / "facts.json")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "distrun.agent.node",
            "--facts",
            str(facts),
            "--channel",
            str(tmp_path / "ch"),
        ],
        env=cli_env(distrun_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == EXIT_NO_JOB, done.stdout + done.stderr
    assert "resources: instance_count is 'many', not int" in done.stderr
    assert "submit the job again" in done.stderr
    assert "Traceback" not in done.stderr
