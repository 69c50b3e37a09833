"""A sweep whose trial is a 2-process PyTorch job: each trial runs its ranks over gloo, with its
parameter, and only as many trials at once as this machine's cores hold."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from distrun.store.index import JobIndex

pytestmark = pytest.mark.slow

DDP = """
    import os, sys
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1) * float(sys.argv[1])])
    dist.all_reduce(total)
    print(f"rank {rank} of {world}: sum {total.item()}", flush=True)
    dist.destroy_process_group()
"""


def test_each_trial_is_a_two_process_gloo_job_with_its_parameter(run_cli, distrun_home: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ddp.py").write_text(textwrap.dedent(DDP), encoding="utf-8")
    sweep = tmp_path / "sweep.yml"
    sweep.write_text(
        textwrap.dedent(
            """
            type: sweep
            trial:
              command: python ddp.py ${{search_space.scale}}
              code: src
              resources: {instance_count: 1}
              distribution: {type: pytorch, process_count_per_instance: 2}
            search_space:
              scale: {type: choice, values: [1, 10]}
            sampling_algorithm: grid
            objective: {goal: maximize, primary_metric: sum}
            limits: {max_concurrent_trials: 4}
            """
        ),
        encoding="utf-8",
    )
    result = run_cli("run", str(sweep), "--name", "ddp")
    # Tracking is off here (DISTRUN_MLFLOW=0): the trials complete, none can be ranked, the sweep fails.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no trial could be ranked: tracking is off" in result.stdout
    # 2 processes a trial: as many trials at once as this machine's cores hold (1 on 2 cores), not 4.
    assert f"{min(4, max(1, (os.cpu_count() or 1) // 2))} at once on local" in result.stdout
    assert "[trial_0] started as job ddp.trial_0 on local, 2 processes: scale=1" in result.stdout
    records = {r.name: r for r in JobIndex(distrun_home / "jobs.db").list(10)}
    for trial, total in (("ddp.trial_0", 3.0), ("ddp.trial_1", 30.0)):
        assert records[trial].status == "Completed"
        assert len(records[trial].processes or []) == 2
        logs = run_cli("logs", trial).stdout
        assert f"rank 0 of 2: sum {total}" in logs and f"rank 1 of 2: sum {total}" in logs
