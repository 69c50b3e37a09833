"""Job files the tests share, and reading what became of a job: its record, its processes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrun.core import procfs
from support.knobs import poll_interval

FOUR_RANK_JOB = """
    command: >-
      {command}
    code: src
    resources:
      instance_count: 2
    distribution:
      type: pytorch
      process_count_per_instance: 2
    limits:
      grace_period: {grace}
"""


def four_rank_job(command: str, grace: float = 3) -> str:
    """A job of 2 simulated nodes x 2 ranks running `command` (for `write_job`)."""
    return FOUR_RANK_JOB.replace("{command}", command).replace("{grace}", str(grace))


def two_step_pipeline(display_name: str = "two steps") -> str:
    """A pipeline of two one-process steps: `write` puts `written` in its output, `read` prints it."""
    return (
        "type: pipeline\n"
        f"display_name: {display_name}\n"
        "jobs:\n"
        "  write:\n"
        "    command: echo written > ${{outputs.out}}/note.txt\n"
        "    outputs:\n"
        "      out: {type: uri_folder}\n"
        "  read:\n"
        "    command: cat ${{inputs.x}}/note.txt\n"
        "    inputs:\n"
        "      x: ${{parent.jobs.write.outputs.out}}\n"
    )


def python_ranks(body: str, grace: float = 3) -> str:
    """Four ranks that each print `up RANK`, then run the Python statements `body`."""
    prelude = "import os, sys, time; print('up', os.environ['RANK'], flush=True)"
    return four_rank_job(f'python -c "{prelude}; {body}"', grace)


def mpi_job(command: str, per_node: int = 2, nodes: int = 2, extra: str = "") -> str:
    """`type: mpi` over `nodes` x `per_node` ranks running `command` from src/ (mpirun on node 0
    starts every rank through the hostfile); `extra` is one more top-level line of YAML."""
    return f"""
        command: {command}
        code: src
        resources:
          instance_count: {nodes}
        distribution:
          type: mpi
          process_count_per_instance: {per_node}
        {extra}
    """


def tensorflow_job(command: str, **counts: int) -> str:
    """`type: tensorflow` over 2 nodes with the task counts given (chief_count=1, worker_count=2,
    ...), each task running `command` from src/, with the Keras 2 switch the examples set."""
    tasks = "".join(f"\n  {key}: {value}" for key, value in counts.items())
    return f"""command: {command}
code: src
environment_variables:
  TF_USE_LEGACY_KERAS: "1"
resources:
  instance_count: 2
distribution:
  type: tensorflow{tasks}
"""


TORCHRUN_PER_NODE_JOB = """
command: >-
  python -m torch.distributed.run --nnodes 2 --nproc-per-node 2 --node-rank $NODE_RANK
  --master-addr $MASTER_ADDR --master-port $MASTER_PORT check.py
code: src
resources:
  instance_count: 2
distribution:
  type: pytorch
  process_count_per_instance: 1
"""


def torchrun_check(suffix: str = '""') -> dict[str, str]:
    """check.py for TORCHRUN_PER_NODE_JOB: every rank all-reduces its rank over gloo and prints
    `rank R of 4 sum 6` and then the value of the Python expression `suffix` (e.g. its node)."""
    return {
        "check.py": f"""
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * dist.get_rank()
dist.all_reduce(t)
line = f"rank {{dist.get_rank()}} of {{dist.get_world_size()}} sum {{int(t.item())}}" + {suffix}
os.write(1, (line + "\\n").encode())  # one write: the ranks under one torchrun share its pipe
dist.destroy_process_group()
"""
    }


def record(home: Path, name: str) -> dict:
    """A job's record as distrun shows it (not through the CLI): a cluster job's brought up to date."""
    from distrun.runner.jobs import get_job
    from distrun.store.layout import Layout

    return dict(get_job(Layout(home), name).__dict__)


def only_job(home: Path) -> str:
    """The name of the one job in this DISTRUN_HOME."""
    from distrun.store.index import JobIndex

    names = JobIndex(home / "jobs.db").names()
    assert len(names) == 1, names
    return names[0]


def recorded_job(home: Path) -> str | None:
    """The name of the one job in this DISTRUN_HOME once it is recorded; None before (for `wait_for`).

    The index file exists a moment before the job's row is in it, so "jobs.db exists" alone does
    not mean there is a job yet.
    """
    from distrun.store.index import JobIndex

    if not (home / "jobs.db").exists():
        return None
    names = JobIndex(home / "jobs.db").names()
    assert len(names) <= 1, names
    return names[0] if names else None


def processes_of_job(name: str, home: Path | str | None = None) -> list[int]:
    """Live processes carrying the job's name in their environment, of this test's jobs only.

    Tests run side by side (pytest-xdist, and CI machines run more than one suite), and job names
    such as "once" repeat across tests: a process counts when it also names a DISTRUN_HOME or job
    folder under `home` (default: this test's DISTRUN_HOME): one whose DISTRUN_HOME is another is
    another test's. A process without DISTRUN_HOME (a rank an engine started with an environment of
    its own) counts, so no leftover of this test is ever missed.
    """
    needle = f"DISTRUN_JOB_NAME={name}".encode()
    home = home if home is not None else os.environ.get("DISTRUN_HOME")
    return [
        pid
        for pid, environ in procfs.environments()
        if needle in environ and _of_home(environ, home) and procfs.is_alive(pid)
    ]


def _of_home(environ: list[bytes], home: Path | str | None) -> bool:
    """Whether a process's environment may be this test's: its DISTRUN_HOME is `home`, or it has none."""
    if home is None:
        return True
    homes = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"DISTRUN_HOME=")]
    return not homes or os.fsencode(str(home)) in homes


def wait_for(predicate: Callable[[], object], timeout: float = 60, interval: float | None = None) -> object:
    """Poll `predicate` until it is true (every DISTRUN_TEST_POLL_S unless `interval` says)."""
    interval = poll_interval() if interval is None else interval
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def prepare_local_job(job_file: Path, name: str) -> Any:
    """`job_file` prepared for local compute in DISTRUN_HOME, as a backend prepares a job (a `PreparedJob`)."""
    from distrun.loading.loader import load_job_file
    from distrun.prepare.compute import resolve_target
    from distrun.prepare.submission import prepare_job
    from distrun.store.layout import Layout

    layout = Layout()
    return prepare_job(load_job_file(job_file), layout, resolve_target("local", layout.config_path), name)


def one_node_facts(job_dir: Path, path: Path) -> Path:
    """Facts of a one-node job on this machine for `python -m distrun.agent.node --facts`, written to `path`.

    The agent's own environment becomes the ranks' base environment, as an engine's node gives it.
    """
    import json

    from distrun.agent.node_facts import NodeFacts

    facts = NodeFacts(
        node_rank=0,
        node_names=("node0",),
        addresses=("127.0.0.1",),
        master_port=29999,
        task_ports=(),
        job_dir=job_dir,
        engine="local",
        engine_job_id="test",
    ).to_dict()
    del facts["base_env"]
    path.write_text(json.dumps(facts))
    return path
