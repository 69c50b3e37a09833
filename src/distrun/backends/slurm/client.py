"""The Slurm commands distrun uses (sbatch, scontrol, sinfo, scancel), with their failures explained.

Everything goes through the client tools, never slurmrestd or accounting (sacct): a job's
state comes from `scontrol show job`, which needs nothing but the controller.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# `slurm_states`, not `state`: the node agent uses this client for the allocation's hosts, and
# `state` brings the job record's and the tracking store's modules (10 ms a node).
from distrun.backends.slurm.slurm_states import distrun_status
from distrun.core.errors import DistrunError
from distrun.core.job_status import TERMINAL_STATUSES, JobStatus

COMMAND_TIMEOUT_S = 60.0


class SlurmUnavailableError(DistrunError):
    """Slurm's tools are missing here, or its controller does not answer."""


class SlurmSubmitError(DistrunError):
    """sbatch refused the job (a partition that does not exist, an account, a limit)."""


@dataclass(frozen=True)
class SlurmJobInfo:
    """One job as `scontrol show job` tells it; `state` None when Slurm no longer knows the job."""

    job_id: str
    state: str | None
    reason: str = ""
    exit_code: str = ""
    node_list: str = ""
    start_time: float | None = None  # epoch seconds
    end_time: float | None = None  # epoch seconds; only once the job ended
    fields: Mapping[str, str] | None = None


class SlurmClient:
    """The Slurm commands distrun uses (sbatch, scontrol, squeue, sinfo, scancel), with their errors explained."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)

    def _tool(self, name: str) -> str:
        found = shutil.which(name, path=self.env.get("PATH"))
        if found is None:
            raise SlurmUnavailableError(
                f"Slurm is not installed here: no {name} on PATH",
                "run distrun on a Slurm login node, or add Slurm's bin folder to PATH",
            )
        return found

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        tool = self._tool(argv[0])
        try:
            return subprocess.run(
                [tool, *argv[1:]],
                env=self.env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmUnavailableError(
                f"the Slurm controller did not answer `{' '.join(argv)}` within {COMMAND_TIMEOUT_S:.0f} s",
                "check `scontrol ping` and that slurmctld is running",
            ) from None

    def check_installed(self) -> None:
        """Raise `SlurmUnavailableError` unless sbatch is on PATH (no process started)."""
        self._tool("sbatch")

    def check_controller(self) -> None:
        """Raise `SlurmUnavailableError` unless sbatch is here and slurmctld answers."""
        self.check_installed()
        out = self._run(["scontrol", "ping"])
        text = (out.stdout + out.stderr).strip()
        if out.returncode != 0 or " is UP" not in text:
            conf = self.env.get("SLURM_CONF", "Slurm's default slurm.conf")
            # `scontrol ping` adds a banner of asterisks to its answer; the first line says it all.
            said = next((line.strip() for line in text.splitlines() if line.strip(" *")), "no answer")
            raise SlurmUnavailableError(
                f"the Slurm controller is down or unreachable (scontrol ping: {said})",
                f"start slurmctld or check the cluster named by {conf}; nothing was submitted",
            )

    def partition(self, name: str | None) -> dict[str, str]:
        """`scontrol show partition` of NAME, or of the cluster's default partition when None."""
        out = self._run(["scontrol", "show", "partition", "--oneliner", *([name] if name else [])])
        if out.returncode != 0 and " not found" not in out.stdout + out.stderr:
            # No answer from the controller (a partition it does not know is answered, below): say so
            # in `scontrol ping`'s words. Asked only then, it costs a submission no round trip.
            self.check_controller()
        found = [parse_scontrol_line(line) for line in out.stdout.splitlines() if line.strip()]
        for fields in found:
            if (name and fields.get("PartitionName") == name) or (not name and fields.get("Default") == "YES"):
                return fields
        if name is None:
            raise SlurmSubmitError(
                "this Slurm cluster has no default partition",
                "set the compute target's partition (--set partition=NAME)",
            )
        known = ", ".join(self.partitions()) or "none"
        raise SlurmSubmitError(
            f"Slurm partition {name!r} does not exist (partitions of this cluster: {known})",
            "set the compute target's partition, e.g. distrun compute create --name NAME --type slurm "
            "--set partition=NAME; nothing was submitted",
        )

    def partitions(self) -> list[str]:
        out = self._run(["sinfo", "--all", "--noheader", "--format=%R"])
        return sorted({line.strip() for line in out.stdout.splitlines() if line.strip()})

    def submit(self, script: Path) -> str:
        """`sbatch --parsable SCRIPT` -> Slurm's job id."""
        out = self._run(["sbatch", "--parsable", str(script)])
        if out.returncode != 0:
            raise self._submit_error(out.stderr.strip() or out.stdout.strip())
        job_id = out.stdout.strip().splitlines()[-1].split(";", 1)[0] if out.stdout.strip() else ""
        if not job_id.isdigit():
            raise SlurmSubmitError(f"sbatch printed no job id: {_one_line(out.stdout + out.stderr)!r}")
        return job_id

    def _submit_error(self, text: str) -> DistrunError:
        message = _one_line(re.sub(r"^sbatch: error: ", "", text, flags=re.M))
        if "invalid partition" in text.lower():
            try:
                known = ", ".join(self.partitions()) or "none"
            except DistrunError:
                known = "unknown"
            return SlurmSubmitError(
                f"Slurm refused the job: {message}",
                f"partitions of this cluster: {known}; set the target's partition (`--set partition=NAME`)",
            )
        if "unable to contact slurm controller" in text.lower() or "connection refused" in text.lower():
            return SlurmUnavailableError(
                f"the Slurm controller is down or unreachable: {message}", "nothing was submitted"
            )
        return SlurmSubmitError(f"Slurm refused the job: {message}", "see `sbatch` in the plan: distrun plan JOB")

    def show_job(self, job_id: str) -> SlurmJobInfo:
        out = self._run(["scontrol", "show", "job", "--oneliner", job_id])
        if out.returncode != 0:
            text = out.stderr + out.stdout
            if "invalid job id" in text.lower():
                return SlurmJobInfo(job_id, None)
            raise SlurmUnavailableError(
                f"could not read Slurm job {job_id}: {_one_line(text)}", "check `scontrol ping`"
            )
        fields = parse_scontrol_line(out.stdout.strip().splitlines()[0] if out.stdout.strip() else "")
        state = fields.get("JobState")
        return SlurmJobInfo(
            job_id,
            state,
            reason=fields.get("Reason", ""),
            exit_code=fields.get("ExitCode", ""),
            node_list=fields.get("NodeList", ""),
            start_time=slurm_time(fields.get("StartTime")) if distrun_status(state) != JobStatus.QUEUED else None,
            end_time=slurm_time(fields.get("EndTime")) if distrun_status(state) in TERMINAL_STATUSES else None,
            fields=fields,
        )

    def cancel(self, job_id: str) -> None:
        out = self._run(["scancel", job_id])
        if out.returncode != 0 and "already completing or completed" not in (out.stderr + out.stdout).lower():
            raise SlurmUnavailableError(f"scancel {job_id} failed: {_one_line(out.stderr + out.stdout)}")

    def hostnames(self, node_list: str) -> list[str]:
        from distrun.backends.slurm.hostlist import expand_hostlist

        names = expand_hostlist(node_list)
        if names is not None:
            return names  # the common form, read without a process (see hostlist)
        out = self._run(["scontrol", "show", "hostnames", node_list])
        if out.returncode != 0:
            raise SlurmUnavailableError(f"scontrol show hostnames {node_list}: {_one_line(out.stderr)}")
        return out.stdout.split()

    def node_addresses(self, names: Sequence[str]) -> dict[str, str]:
        """NodeName -> NodeAddr (where the node is reached; the name itself when Slurm says so)."""
        out = self._run(["scontrol", "show", "node", "--oneliner", ",".join(names)])
        addresses = {}
        for line in out.stdout.splitlines():
            fields = parse_scontrol_line(line)
            if "NodeName" in fields:
                addresses[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
        return addresses


def parse_scontrol_line(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value two ...` (scontrol --oneliner) -> dict; values may hold spaces."""
    fields: dict[str, str] = {}
    key = None
    for token in line.split(" "):
        name, sep, value = token.partition("=")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9_/:]*", name):
            key = name
            fields[key] = value
        elif key is not None and token:
            fields[key] += " " + token
    return fields


def slurm_time(text: str | None) -> float | None:
    """scontrol's local timestamps (2024-05-01T12:00:00) -> epoch seconds; None for Unknown/None."""
    if not text or not text[:1].isdigit():
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())
