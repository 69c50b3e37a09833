"""Jobs that restart, shared by the restart tests of local compute and Slurm."""

from __future__ import annotations

from support.jobs import four_rank_job

# Rank 1 fails on attempt 0 only: it leaves a marker in ./outputs, which survives the restart.
FAIL_ONCE = """python -c "import os, sys; os.makedirs('outputs', exist_ok=True);
      print('rank', os.environ['RANK'], 'attempt', os.environ['DISTRUN_RESTART_COUNT'],
      os.environ['TORCHELASTIC_RESTART_COUNT'], flush=True);
      marker = 'outputs/failed_once';
      again = os.path.exists(marker);
      rank1 = os.environ['RANK'] == '1';
      rank1 and not again and open(marker, 'w').close();
      sys.exit(3 if rank1 and not again else 0)\""""

# Every rank saves a checkpoint when told to stop; a rank that finds one ends at once.
CHECKPOINTS = """python -c "import os, signal, sys, time; os.makedirs('outputs', exist_ok=True);
      ckpt = 'outputs/ckpt_' + os.environ['RANK'];
      resumed = os.path.exists(ckpt);
      signal.signal(signal.SIGTERM, lambda *a: (open(ckpt, 'w').close(), print('saved', flush=True), sys.exit(143)));
      print('rank', os.environ['RANK'], 'attempt', os.environ['DISTRUN_RESTART_COUNT'], 'resumed', resumed, flush=True);
      resumed and sys.exit(0);
      time.sleep(300)\""""
RANKS = range(4)


def with_limits(command: str, *limits: str, grace: float = 3) -> str:
    """The 2 x 2 rank job of conftest running `command`, with more `limits:` lines."""
    return four_rank_job(command, grace) + "".join(f"      {line}\n" for line in limits)
