"""The CLI as a person reads it: tables, readable records, verbs, messages on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from support.cli import REPO, cli_env
from support.jobs import four_rank_job, only_job, processes_of_job, recorded_job, wait_for

EXAMPLE = REPO / "examples" / "pytorch-ddp" / "job.yml"
FAIL_PY = """
    import os
    if os.environ["RANK"] == "2":
        raise ValueError("bad batch on rank 2\\nsecond line of the message")
"""


def test_plan_text_shows_the_job_wide_environment_once(run_cli):
    out = run_cli("plan", str(EXAMPLE)).stdout
    assert out.count("\n  WORLD_SIZE=4\n") == 1 and out.count("MASTER_ADDR=") == 1
    assert "environment of every process:" in out
    assert out.count("\n    NODE_RANK=1\n") == 1  # once for node 1, not once per process
    assert "[1/3] rank_3" in out and "    RANK=3" in out
    assert "note: distrun:" not in out


def test_run_says_distrun_once_per_line(run_cli, write_job):
    job = write_job("command: echo hi\nenvironment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest\n")
    out = run_cli("run", str(job)).stdout
    assert "distrun: local compute runs in this Python environment" in out
    assert "distrun: distrun:" not in out


def test_a_failed_job_shown_for_people_and_as_yaml(run_cli, write_job, distrun_home):
    job = write_job(four_rank_job("python fail.py"), {"fail.py": FAIL_PY})
    assert run_cli("run", str(job)).returncode == 1
    name = only_job(distrun_home)
    shown = run_cli("job", "show", name)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert f"Name:     {name}" in text and "Status:   Failed" in text
    assert "Reason:   rank 2 on node 1 exited with code 1" in text
    assert "ValueError: bad batch on rank 2\n  second line of the message" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("rank_")}
    assert rows["rank_2"][1:5] == ["1", "0", "failed", "1"]
    assert rows["rank_3"][1:3] == ["1", "1"] and rows["rank_3"][3] in ("stopped", "completed")
    assert rows["rank_2"][-1] == "user_logs/std_log_process_02.txt"
    # Without a name: the newest job.
    assert f"Name:     {name}" in run_cli("job", "show").stdout
    as_yaml = run_cli("job", "show", name, "-o", "yaml").stdout
    assert "  traceback: |" in as_yaml and "    ValueError: bad batch on rank 2\n" in as_yaml
    assert json.loads(run_cli("job", "show", name, "-o", "json").stdout)["status"] == "Failed"
    # Canceling it says it had already ended.
    canceled = run_cli("job", "cancel", name)
    assert canceled.returncode == 1
    assert f"job {name} had already ended (Failed: rank 2 on node 1 exited with code 1)" in canceled.stderr
    assert "Canceled" not in canceled.stdout + canceled.stderr


def test_job_list_keeps_names_whole_on_one_line_in_80_columns(run_cli, write_job):
    long_name = "a_long_job_name_users_paste_into_show_12"  # 40 characters
    job = write_job("command: echo hi\n")
    assert run_cli("run", str(job), "--name", long_name).returncode == 0
    assert run_cli("run", str(job), "--name", "short_one").returncode == 0
    listed = run_cli("job", "list", env={"COLUMNS": "80"}).stdout
    lines = listed.splitlines()
    assert all(len(line) <= 80 for line in lines), listed
    assert lines[0].split() == ["NAME", "STATUS", "COMPUTE", "CREATED", "DURATION"]
    rows = [line.split() for line in lines[2:]]
    assert [row[0] for row in rows] == ["short_one", long_name]  # newest first, never cut
    assert all(row[1] == "Completed" and row[2] == "local" and row[-1].endswith("s") for row in rows)


def test_detached_run_prints_the_name_and_how_to_follow_it(run_cli, write_job, distrun_home):
    job = write_job("command: echo hi from $RANK\nname: bg_job\n")
    created = run_cli("run", "-d", str(job))
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("Created job bg_job on local")
    for verb in ("job stream bg_job", "logs bg_job", "job show bg_job", "job cancel bg_job"):
        assert f"distrun {verb}" in created.stdout
    # Both spellings of each verb: `stream` / `job stream`, `logs` / `job logs`.
    streamed = run_cli("stream", "bg_job")
    assert streamed.returncode == 0 and "Status: Completed" in streamed.stdout
    assert "Status: Completed" in run_cli("job", "stream", "bg_job").stdout
    assert run_cli("logs", "bg_job").stdout == run_cli("job", "logs", "bg_job").stdout == "[0/0] hi from 0\n"
    assert run_cli("logs").stdout == "[0/0] hi from 0\n"  # the newest job
    again = run_cli("job", "create", "--file", str(job), "--name", "bg_json", "-o", "json")
    assert json.loads(again.stdout)["name"] == "bg_json"


def test_compute_targets_as_tables(run_cli):
    created = run_cli("compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partition=debug")
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[0].split() == ["NAME", "TYPE", "SETTINGS"]
    listed = run_cli("compute", "list").stdout.splitlines()
    assert [line.split()[:2] for line in listed[2:]] == [["local", "local"], ["hpc", "slurm"]]
    assert "partition=debug" in listed[3]
    as_json = json.loads(run_cli("compute", "list", "-o", "json").stdout)
    assert as_json[1] == {"name": "hpc", "type": "slurm", "partition": "debug"}


def test_compute_created_from_a_file_with_overrides(run_cli, tmp_path):
    compute = tmp_path / "compute.yml"
    compute.write_text(
        "$schema: https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json\n"
        "name: cpu-cluster\ntype: amlcompute\nsize: STANDARD_DS3_v2\nmin_instances: 0\nmax_instances: 2\n"
    )
    # An Azure ML cluster names a local target, as the SDK's AmlCompute(...) does.
    local = run_cli("compute", "create", "-f", str(compute), "-o", "json")
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout) == {"name": "cpu-cluster", "type": "local"}
    assert "compute cpu-cluster (type: amlcompute) is a local target" in local.stderr
    # Azure's other compute types only Azure runs: refused at their line, saying what to do.
    instance = tmp_path / "instance.yml"
    instance.write_text("name: my-ci\nsize: STANDARD_DS3_v2\ntype: computeinstance\n")
    refused = run_cli("compute", "create", "-f", str(instance))
    assert refused.returncode == 2, refused.stderr
    assert f"{instance}:3:" in refused.stderr and "computeinstance is Azure ML's own compute" in refused.stderr
    assert "--set type=slurm" in refused.stderr and "Traceback" not in refused.stderr

    created = run_cli(
        "compute",
        "create",
        "-f",
        str(compute),
        "--set",
        "name=hpc",
        "--set",
        "type=slurm",
        "--set",
        "partition=debug",
        "-o",
        "json",
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout) == {"name": "hpc", "type": "slurm", "partition": "debug"}
    assert "size, min_instances, max_instances size Azure ML's clusters; not used by distrun" in created.stderr
    listed = json.loads(run_cli("compute", "list", "-o", "json").stdout)
    assert listed[1:] == [
        {"name": "cpu-cluster", "type": "local"},
        {"name": "hpc", "type": "slurm", "partition": "debug"},
    ]


def test_job_validate_checks_the_compute_target_as_run_does(run_cli, write_job):
    # Azure ML's examples ship this placeholder; `run` refuses it, and so must `validate`.
    job = write_job("command: echo hi\ncompute: '< your compute name >'\n")
    validated = run_cli("job", "validate", "-f", str(job))
    ran = run_cli("run", str(job))
    assert validated.returncode == ran.returncode == 2
    assert "unknown compute target '< your compute name >'; known targets: local" in validated.stderr
    assert validated.stderr == ran.stderr and "Traceback" not in validated.stderr
    fixed = run_cli("job", "validate", "-f", str(job), "--compute", "local", "-o", "json")
    assert fixed.returncode == 0, fixed.stderr
    # The job as written; --compute only picks the target.
    assert json.loads(fixed.stdout)["compute"] == "< your compute name >"
    elsewhere = run_cli("job", "validate", "-f", str(job), "--compute", "hpc")
    assert elsewhere.returncode == 2 and "unknown compute target 'hpc'" in elsewhere.stderr


def test_ctrl_c_while_following_says_the_job_keeps_running(write_job, distrun_home):
    job = write_job("command: echo up; sleep 120\nname: long_one\n")
    env = cli_env(distrun_home)
    assert subprocess.run([sys.executable, "-m", "distrun", "run", "-d", str(job)], env=env).returncode == 0
    wait_for(lambda: len(processes_of_job("long_one")) == 1, timeout=120)
    try:
        follower = subprocess.Popen(
            [sys.executable, "-m", "distrun", "logs", "long_one", "-f"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        wait_for(lambda: (distrun_home / "jobs" / "long_one" / "user_logs").exists(), timeout=60)
        line = follower.stdout.readline()  # type: ignore[union-attr]
        assert "up" in line
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=60)
        assert "the job keeps running (distrun job cancel long_one stops it)" in err
        assert "aborted" not in err and "Traceback" not in err
        assert len(processes_of_job("long_one")) == 1
    finally:
        subprocess.run([sys.executable, "-m", "distrun", "job", "cancel", "long_one"], env=env, timeout=120)


def test_ctrl_c_says_how_long_distrun_waits_and_that_a_second_one_kills(write_job, distrun_home):
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"
    )
    job = write_job(four_rank_job(f'python -c "{script}"', grace=60))
    proc = subprocess.Popen(
        [sys.executable, "-m", "distrun", "run", str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(distrun_home),
    )
    name = wait_for(lambda: recorded_job(distrun_home), timeout=120)
    wait_for(lambda: len(processes_of_job(name)) == 4, timeout=120)
    lines: list[str] = []
    while sum("up" in line for line in lines) < 4:
        lines.append(proc.stdout.readline())  # type: ignore[union-attr]
    os.kill(proc.pid, signal.SIGINT)
    while "received" not in lines[-1]:
        lines.append(proc.stdout.readline())  # type: ignore[union-attr]
    assert "those still running in 60 s are killed (press Ctrl-C again to kill them now)" in lines[-1]
    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Status: Canceled" in out
    wait_for(lambda: processes_of_job(name) == [], timeout=30)


def test_keys_without_meaning_here_are_noted_once(run_cli, write_job):
    job = write_job(
        """
        command: echo hi
        resources:
          instance_type: Standard_NC6
          shm_size: 16g
          docker_args: --ipc=host
        identity:
          type: user_identity
        services:
          ssh:
            type: ssh
        queue_settings:
          job_tier: standard
        """
    )
    note = (
        "services, identity, queue_settings, resources.instance_type, resources.shm_size, "
        "resources.docker_args: no meaning on local compute; recorded with the job, not used"
    )
    out = run_cli("run", str(job)).stdout
    assert out.count(note) == 1 and f"distrun: {note}\n" in out
    assert run_cli("plan", str(job)).stdout.count(note) == 1


def test_every_showing_verb_speaks_table_json_and_yaml(run_cli, write_job, tmp_path):
    job = write_job("command: echo hi\nname: one_job\n")
    assert run_cli("run", str(job)).returncode == 0
    assert run_cli("data", "create", "--name", "ds", "--path", str(tmp_path)).returncode == 0
    for verb in (["job", "list"], ["job", "show", "one_job"], ["compute", "list"], ["data", "list"]):
        as_yaml = run_cli(*verb, "-o", "yaml")
        assert as_yaml.returncode == 0, as_yaml.stderr
        assert as_yaml.stdout == views_yaml(json.loads(run_cli(*verb, "-o", "json").stdout)) + "\n", verb
    # `text`, which `job show` and `run -d` once took, is still read as the table.
    assert run_cli("job", "show", "one_job", "-o", "text").stdout == run_cli("job", "show", "one_job").stdout
    listed = run_cli("data", "list", "-o", "table").stdout.splitlines()
    assert listed[0].split()[:5] == ["NAME", "VERSION", "TYPE", "PATH", "CREATED"] and listed[2].split()[:2] == [
        "ds",
        "1",
    ]
    wrong = run_cli("job", "list", "-o", "xml")
    assert wrong.returncode == 2 and "'table', 'json', 'yaml'" in wrong.stderr


def views_yaml(data):
    from distrun.cli.output import as_yaml

    return as_yaml(data)


def test_metrics_and_cancel_take_name_or_dash_n_and_default_to_the_newest(run_cli, write_job):
    job = write_job("command: echo hi\n")
    assert run_cli("run", str(job), "--name", "older").returncode == 0
    assert run_cli("run", str(job), "--name", "newest").returncode == 0
    # This home runs jobs without MLflow: the message names the job each form chose.
    assert "job newest has no metrics" in run_cli("metrics").stderr
    assert "job older has no metrics" in run_cli("metrics", "-n", "older").stderr
    assert "job older has no metrics" in run_cli("metrics", "older").stderr
    assert "job newest had already ended" in run_cli("job", "cancel").stderr
    assert "job older had already ended" in run_cli("job", "cancel", "-n", "older").stderr


def test_job_create_takes_the_options_run_takes(run_cli, write_job):
    job = write_job("command: echo hi\nname: limited\n")
    created = run_cli("job", "create", "-f", str(job), "--hang-timeout", "30", "--max-restarts", "1", "-s")
    assert created.returncode == 0, created.stderr
    assert "Timeouts: limits.hang_timeout 30 s" in run_cli("job", "show", "limited").stdout
    wrong = run_cli("job", "create", "-f", str(job), "--max-restarts", "-1")
    assert wrong.returncode == 2 and "--max-restarts" in wrong.stderr


def test_data_and_component_listings_are_tables_with_readable_times(run_cli, tmp_path):
    import re
    import shutil

    created = run_cli("data", "create", "--name", "ds", "--path", str(tmp_path), "-d", "[bold]raw[/bold] images")
    assert created.returncode == 0, created.stderr
    fields = {line.split()[0]: line.split(None, 1)[1] for line in created.stdout.splitlines()[2:]}
    assert fields["name"] == "ds" and fields["description"] == "[bold]raw[/bold] images"  # not read as markup
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", fields["created_at"]), fields
    listed = run_cli("data", "list").stdout.splitlines()
    assert listed[0].split() == ["NAME", "VERSION", "TYPE", "PATH", "CREATED", "DESCRIPTION"]
    assert re.fullmatch(r"ds +1 +uri_folder +\S+ +\d\d:\d\d +\[bold\]raw\[/bold\] images", listed[2]), listed

    folder = tmp_path / "chain"
    shutil.copytree(REPO / "tests" / "data" / "pipelines" / "chain", folder)
    made = run_cli("component", "create", "-f", str(folder / "train.yml"))
    assert made.returncode == 0 and "created_at" in made.stdout and "{" not in made.stdout, made.stdout
    components = run_cli("component", "list").stdout.splitlines()
    assert components[0].split() == ["NAME", "VERSION", "CREATED", "PATH"]
    assert re.fullmatch(r"train +1 +\d\d:\d\d +\S+", components[2]), components


def test_job_list_filters_and_folds_steps_under_their_pipeline(run_cli, write_job):
    ok = write_job("command: echo hi\nexperiment_name: exp_a\n")
    bad = write_job("command: exit 3\n")
    assert run_cli("run", str(ok), "--name", "good_one").returncode == 0
    assert run_cli("run", str(bad), "--name", "bad_one").returncode == 1
    pipeline = REPO / "tests" / "data" / "pipelines" / "chain" / "pipeline.yml"
    assert run_cli("run", str(pipeline), "--name", "pl").returncode == 0

    def names(*args):
        listed = run_cli("job", "list", "-o", "json", *args)
        assert listed.returncode == 0, listed.stderr
        return [record["name"] for record in json.loads(listed.stdout)]

    assert names() == ["pl", "bad_one", "good_one"]  # the steps folded under their pipeline
    steps = names("--parent-job-name", "pl")
    assert len(steps) == 3 and all(name not in ("pl", "bad_one", "good_one") for name in steps)
    assert set(names("--include-children")) == {"pl", "bad_one", "good_one", *steps}
    assert names("--status", "failed") == ["bad_one"]
    assert names("--experiment-name", "exp_a") == ["good_one"]
    assert names("--status", "Completed", "--max-results", "1") == ["pl"]
    table = run_cli("job", "list").stdout
    assert "pipeline (3 steps)" in table and not any(step in table for step in steps)


def test_job_archive_hides_and_job_delete_reclaims_an_ended_job(run_cli, write_job, distrun_home):
    ended = write_job("command: head -c 300000 /dev/zero > big.bin\nname: old_one\n")
    assert run_cli("run", str(ended)).returncode == 0
    running = write_job("command: sleep 60\nname: still_running\n")
    assert run_cli("run", "-d", str(running)).returncode == 0
    try:
        assert run_cli("job", "archive", "-n", "old_one").stdout == "old_one: archived\n"
        listed = [r["name"] for r in json.loads(run_cli("job", "list", "-o", "json").stdout)]
        assert listed == ["still_running"]
        every = [r["name"] for r in json.loads(run_cli("job", "list", "--include-archived", "-o", "json").stdout)]
        assert every == ["still_running", "old_one"]
        assert json.loads(run_cli("job", "show", "old_one", "-o", "json").stdout)["archived_at"]
        refused = run_cli("job", "delete", "still_running")
        assert refused.returncode == 2 and "has not ended" in refused.stderr and "job cancel" in refused.stderr
        assert (distrun_home / "jobs" / "still_running").is_dir()
        # A destructive verb never picks the newest job by itself, and says why.
        unnamed = run_cli("job", "delete")
        assert unnamed.returncode == 2 and "never picks the newest job by itself" in unnamed.stderr
        assert "distrun job delete NAME... (or -n NAME" in unnamed.stderr
        deleted = run_cli("job", "delete", "-n", "old_one")
        assert deleted.returncode == 0, deleted.stderr
        assert deleted.stdout.splitlines() == ["deleted old_one", "1 job deleted, 0.3 MB freed"]
        assert not (distrun_home / "jobs" / "old_one").exists()
        gone = run_cli("job", "show", "old_one")
        assert gone.returncode == 2 and "no job named 'old_one'" in gone.stderr
        # Old jobs in one go: every ended one created before then; a running one is left alone.
        assert run_cli("run", str(write_job("command: echo hi\nname: another\n"))).returncode == 0
        swept = run_cli("job", "delete", "--older-than", "0")
        assert swept.returncode == 0 and swept.stdout.startswith("deleted another\n1 job deleted"), swept.stdout
        assert [r["name"] for r in json.loads(run_cli("job", "list", "-o", "json").stdout)] == ["still_running"]
    finally:
        run_cli("job", "cancel", "still_running")


def test_compute_show_and_delete(run_cli, distrun_home):
    config = distrun_home / "config.yaml"
    assert run_cli("compute", "create", "--name", "hpc", "--type", "slurm", "--set", "partition=debug").returncode == 0
    assert run_cli("compute", "create", "--name", "other", "--type", "slurm").returncode == 0
    config.write_text("# my targets\n" + config.read_text())
    shown = run_cli("compute", "show", "hpc")
    assert shown.returncode == 0 and shown.stdout.splitlines()[2].split() == ["hpc", "slurm", "partition=debug"]
    assert json.loads(run_cli("compute", "show", "-n", "hpc", "-o", "json").stdout) == {
        "name": "hpc",
        "type": "slurm",
        "partition": "debug",
    }
    assert run_cli("compute", "delete", "hpc").stdout == "compute hpc: deleted\n"
    assert [t["name"] for t in json.loads(run_cli("compute", "list", "-o", "json").stdout)] == ["local", "other"]
    assert config.read_text().startswith("# my targets\n")  # the rest of the file kept
    missing = run_cli("compute", "show", "hpc")
    assert missing.returncode == 2 and "unknown compute target 'hpc'" in missing.stderr
    again = run_cli("compute", "delete", "hpc")
    assert again.returncode == 2 and "no compute target named 'hpc'" in again.stderr
    local = run_cli("compute", "delete", "local")
    assert local.returncode == 2 and "built in" in local.stderr


def test_stacks_of_an_ended_job_names_it_in_the_hint(run_cli, write_job):
    assert run_cli("run", str(write_job("command: echo hi\nname: ended_job\n"))).returncode == 0
    stacks = run_cli("job", "stacks")
    assert stacks.returncode == 2 and "`distrun job show ended_job` says how it ended" in stacks.stderr


def test_shell_completion_completes_job_names(run_cli, write_job):
    for name in ("alpha_one", "alpha_two", "beta"):
        assert run_cli("run", str(write_job(f"command: echo hi\nname: {name}\n"))).returncode == 0
    env = {"_DISTRUN_COMPLETE": "bash_complete", "COMP_WORDS": "distrun job show alp", "COMP_CWORD": "3"}
    done = run_cli(env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["plain,alpha_two", "plain,alpha_one"]
    env = {**env, "COMP_WORDS": "distrun logs -n b", "COMP_CWORD": "3"}
    assert run_cli(env=env).stdout.splitlines() == ["plain,beta"]
    env = {**env, "COMP_WORDS": "distrun job ar", "COMP_CWORD": "2"}
    assert run_cli(env=env).stdout.splitlines() == ["plain,archive"]


def test_the_example_sweep_plans_its_trials(run_cli):
    planned = run_cli("plan", str(REPO / "examples" / "sweep" / "sweep.yml"))
    assert planned.returncode == 0, planned.stderr
    assert "objective: minimize loss" in planned.stdout and "First 5 trials:\n  trial_0  lr=" in planned.stdout
    assert "command: python train.py --lr " in planned.stdout
