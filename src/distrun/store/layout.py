"""Where things live: DISTRUN_HOME and the folder of each job. The one module that knows paths.

$DISTRUN_HOME/            (default ~/.distrun)
    config.yaml           compute targets
    jobs.db               SQLite index of all jobs
    jobs/<name>/
        job.yml           the resolved job, as run
        job.json          the same, for distrun to read back
        plan.json         every process, its command and environment
        bindings.json     what each input and output reference became
        env/              the job's own writable layer over its built environment (a job
                          with a conda_file): where its `pip install` goes
        code/             the snapshot of `code`; each process's working directory
        code/outputs/     files a process writes to ./outputs  (artifacts)
        code/logs/        files a process writes to ./logs     (artifacts)
        inputs/<name>/    inputs with mode: download
        named-outputs/<name>/
        user_logs/std_log_process_NN.txt
        system_logs/      distrun's own logs (launcher.txt: the detached local supervisor's)
        <compute type>/   the engine's own files for the job (slurm/: see backends/slurm/layout.py)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from distrun.core.errors import DistrunError

ARTIFACT_DIRS = ("outputs", "logs")


def distrun_home() -> Path:
    return Path(os.environ.get("DISTRUN_HOME") or Path.home() / ".distrun").expanduser().absolute()


@dataclass(frozen=True)
class JobFolder:
    root: Path

    @property
    def code(self) -> Path:
        return self.root / "code"

    @property
    def user_logs(self) -> Path:
        return self.root / "user_logs"

    @property
    def system_logs(self) -> Path:
        return self.root / "system_logs"

    @property
    def launcher_log(self) -> Path:
        return self.system_logs / "launcher.txt"

    def engine_folder(self, kind: str) -> Path:
        """Where a backend keeps its engine's files for this job (its request, ids, node outcomes)."""
        return self.root / kind

    @property
    def named_outputs(self) -> Path:
        return self.root / "named-outputs"

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def job_yaml(self) -> Path:
        return self.root / "job.yml"

    @property
    def job_json(self) -> Path:
        return self.root / "job.json"

    @property
    def plan_json(self) -> Path:
        return self.root / "plan.json"

    @property
    def bindings_json(self) -> Path:
        return self.root / "bindings.json"

    @property
    def python_layer(self) -> Path:
        return self.root / "env"

    def named_output(self, name: str) -> Path:
        return self.inside(self.named_outputs / name)

    def artifact_dirs(self) -> list[Path]:
        return [self.code / name for name in ARTIFACT_DIRS]

    def inside(self, path: Path) -> Path:
        """Refuse any path that would leave the job folder (names are checked too; belt and braces)."""
        resolved = path.resolve()
        if resolved != self.root.resolve() and self.root.resolve() not in resolved.parents:
            raise DistrunError(
                f"{path} leads to {resolved}, outside the job folder {self.root}",
                "a symbolic link made by the job's own processes is never followed; remove it to go on",
            )
        return path


@dataclass(frozen=True)
class NodeChannelPaths:
    """The files of a shared-folder outcome channel (`distrun.agent.outcome_channel`), in `folder`.

    node_NN.json          node NN's outcome
    <marker>_NN           node NN set a peer marker (e.g. main_done_03)
    """

    folder: Path

    def outcome(self, node_rank: int) -> Path:
        return self.folder / f"node_{node_rank:02d}.json"

    def marker(self, marker: str, node_rank: int) -> Path:
        return self.folder / f"{marker}_{node_rank:02d}"


class Layout:
    def __init__(self, home: Path | None = None) -> None:
        self.home = home or distrun_home()

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"

    @property
    def db_path(self) -> Path:
        return self.home / "jobs.db"

    @property
    def config_path(self) -> Path:
        return self.home / "config.yaml"

    def job(self, name: str) -> JobFolder:
        return JobFolder(self.jobs_dir / name)
