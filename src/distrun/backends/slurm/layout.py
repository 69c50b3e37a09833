"""Where a Slurm job's own files live in its job folder (the rest is `distrun.store.layout`).

slurm/batch.sh        the script submitted, exactly as `distrun plan` shows it
slurm/job_id          Slurm's job id
slurm/output.txt      the batch step's output: srun's and the node agents' messages, every rank's lines
slurm/node_NN.json    each node's outcome (status, root cause with traceback, wall-clock times)
slurm/main_done_NN    node NN's training processes all completed (the agents' peer marker)
slurm/cancel          the time `distrun job cancel` asked, written before it runs scancel
slurm/preempted       when (line 1, epoch s) a SIGTERM from outside reached the batch script (a job with restarts)
slurm/attempts.json   a job with restarts: every attempt that ended (`distrun.restarts.policy.Attempt`)
slurm/attempt_K/      the node outcomes of attempt K, once a later attempt started
slurm/container.json  a job whose processes run in containers: how (`distrun.agent.containers.ContainerRun`)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distrun.store.layout import JobFolder, NodeChannelPaths


@dataclass(frozen=True)
class SlurmPaths:
    job_dir: Path

    @property
    def folder(self) -> Path:
        return JobFolder(self.job_dir).engine_folder("slurm")

    @property
    def script(self) -> Path:
        return self.folder / "batch.sh"

    @property
    def job_id(self) -> Path:
        return self.folder / "job_id"

    @property
    def output(self) -> Path:
        return self.folder / "output.txt"

    @property
    def cancel(self) -> Path:
        return self.folder / "cancel"

    @property
    def preempted(self) -> Path:
        return self.folder / "preempted"

    @property
    def attempts(self) -> Path:
        return self.folder / "attempts.json"

    @property
    def container(self) -> Path:
        return self.folder / "container.json"

    def attempt_folder(self, attempt: int) -> Path:
        return self.folder / f"attempt_{attempt}"

    @property
    def channel(self) -> NodeChannelPaths:
        """The node agents' outcome channel: a folder on the filesystem every node sees."""
        return NodeChannelPaths(self.folder)

    def node_outcome(self, node_rank: int) -> Path:
        return self.channel.outcome(node_rank)
