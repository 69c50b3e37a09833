"""A job that plants links where distrun will make folders, and floods it with stack requests.

Its processes can write the job folder, so they can swap any folder name in it for a link to
a folder outside (one a rank in a container could not reach itself). Whatever they plant,
distrun makes no folder and writes no file through the link: every folder and file it creates
in a job folder is made relative to the open folder above it, never following a link. And what
it writes on the job's behalf is bounded: a flood of planted `job stacks` requests gets at most
MAX_UNCOLLECTED_ANSWERS answers in the job folder at once.
"""

from __future__ import annotations

import time
from pathlib import Path

from distrun.agent.stack_requests import MAX_UNCOLLECTED_ANSWERS
from support.jobs import wait_for
from support.reliability import assert_nothing_left, record, wait_running

FLOOD = 5 * MAX_UNCOLLECTED_ANSWERS
# Stack requests are looked for every 0.5 s: this many looks after the answers stop growing.
SETTLE_S = 3.0


def _start_planting(start_cli, write_job, home: Path, name: str, plant: str) -> None:  # type: ignore[no-untyped-def]
    """Start a job whose rank runs `plant`, says so and waits; back once it has planted."""
    job = write_job(f"command: >-\n  {plant} && echo planted && sleep 300\ncode: src\nlimits:\n  grace_period: 1\n")
    start_cli("run", str(job), "--name", name)
    wait_running(home, name)
    log = home / "jobs" / name / "user_logs" / "std_log_process_00.txt"
    wait_for(lambda: log.exists() and b"planted" in log.read_bytes(), timeout=60)


def test_a_stacks_folder_swapped_for_a_link_gets_nothing_made_through_it(
    run_cli, start_cli, write_job, distrun_home, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    _start_planting(start_cli, write_job, distrun_home, "linked_stacks", f'ln -s {outside} "$DISTRUN_JOB_DIR/stacks"')
    asked = run_cli("job", "stacks", "linked_stacks", timeout=90)
    assert "Traceback" not in asked.stderr, asked.stderr
    assert asked.returncode == 2 and "stacks is a symbolic link" in asked.stderr, asked.stdout + asked.stderr
    # `stacks/requests` was not made in the folder the link points to.
    assert list(outside.iterdir()) == []
    assert run_cli("job", "cancel", "linked_stacks").returncode == 0
    assert_nothing_left("linked_stacks")


def test_a_flood_of_planted_stack_requests_gets_a_bounded_number_of_answers(
    run_cli, start_cli, write_job, distrun_home
):
    plant = (
        'mkdir -p "$DISTRUN_JOB_DIR/stacks/requests" && cd "$DISTRUN_JOB_DIR/stacks/requests" && '
        f"for i in $(seq 1 {FLOOD}); do printf '{{\"native\": false}}' > $(printf '%016x' $i); done"
    )
    _start_planting(start_cli, write_job, distrun_home, "flooded", plant)
    answers = distrun_home / "jobs" / "flooded" / "stacks" / "answers"

    def answered() -> list[str]:
        return sorted(p.name for p in answers.iterdir()) if answers.is_dir() else []

    wait_for(lambda: len(answered()) >= MAX_UNCOLLECTED_ANSWERS, timeout=120)
    time.sleep(SETTLE_S)
    assert len(answered()) == MAX_UNCOLLECTED_ANSWERS
    # An asker that takes its answers away makes room: the requests still waiting are answered.
    for name in answered()[:3]:
        (answers / name).unlink()
    wait_for(lambda: len(answered()) == MAX_UNCOLLECTED_ANSWERS, timeout=60)
    time.sleep(SETTLE_S)
    assert len(answered()) == MAX_UNCOLLECTED_ANSWERS
    assert run_cli("job", "cancel", "flooded").returncode == 0
    assert record(distrun_home, "flooded")["status"] == "Canceled"
    assert_nothing_left("flooded")


def test_user_logs_swapped_for_a_link_before_a_restart_gets_nothing_made_through_it(
    run_cli, write_job, distrun_home, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the job's")
    # Attempt 0 moves user_logs/ aside, leaves a link to `outside` in its place and fails;
    # attempt 1 completes.
    job = write_job(
        f"""
        command: >-
          if [ "$DISTRUN_RESTART_COUNT" = 0 ]; then cd "$DISTRUN_JOB_DIR" && mv user_logs moved_logs
          && ln -s {outside} user_logs && exit 3; fi; echo attempt "$DISTRUN_RESTART_COUNT"
        code: src
        """
    )
    done = run_cli("run", str(job), "--name", "relinked", "--max-restarts", "1", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [entry.name for entry in outside.iterdir()] == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "not the job's"
    logs = distrun_home / "jobs" / "relinked" / "user_logs"
    assert not logs.is_symlink() and (logs / "std_log_process_00.txt").read_text() == "attempt 1\n"
    assert [a["status"] for a in record(distrun_home, "relinked")["attempts"]] == ["Failed", "Completed"]
