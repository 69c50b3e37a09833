"""Everything a gang makes ready before its first process starts: folders, node files, launchers, logs.

Every log is opened before any process starts: a process cannot plant a link or a pipe under
the name of a log that is yet to be opened. On a restart the job folder holds what the last
attempt's processes left there: the log folder, the node files and the logs are made and opened
without following a link below the job folder (`core.safe_files.open_folder_beneath`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from distrun.agent import process_tree
from distrun.agent.gang_state import why
from distrun.agent.node_files import write_node_files
from distrun.agent.working_folders import make_artifact_dirs
from distrun.core.file_modes import make_dirs_beneath, open_append
from distrun.plan.model import LaunchPlan, NodePlan


class CannotStart(Exception):
    """What keeps the gang from starting (its message is the gang's reason to fail)."""


def prepare_start(
    plan: LaunchPlan, nodes: Sequence[NodePlan], log_dir: Path, base: Mapping[str, str]
) -> dict[str, int]:
    """Each process's name -> its log, opened for appending; CannotStart when something is missing."""
    try:
        make_dirs_beneath(log_dir.parent, log_dir.name)
    except OSError as exc:
        raise CannotStart(f"could not create {log_dir}: {why(exc)}") from None
    # ./outputs and ./logs exist when each process starts, as on Azure ML (on every backend: all start here).
    make_artifact_dirs((spec.cwd for node in nodes for spec in node.processes), log_dir.parent)
    _prepare_nodes(plan, nodes, log_dir.parent, base)
    log_fds: dict[str, int] = {}
    for node in nodes:
        for spec in node.processes:
            log_path = log_dir / spec.log_name
            try:
                log_fds[spec.name] = open_append(log_path, root=log_dir.parent)
            except OSError as exc:
                for fd in log_fds.values():
                    os.close(fd)
                raise CannotStart(f"could not create {log_path}: {why(exc)}") from None
    return log_fds


def _prepare_nodes(plan: LaunchPlan, nodes: Sequence[NodePlan], job_root: Path, base: Mapping[str, str]) -> None:
    """The files the nodes need (MPI hostfile), and their launchers on PATH."""
    try:
        for node in nodes:
            # user_logs/ sits in the job folder, which the plan's file paths are relative to.
            write_node_files(node, job_root)
    except OSError as exc:
        raise CannotStart(f"could not write the job's node files: {exc.strerror or exc}") from None
    for node in nodes:
        for spec in node.processes:
            if spec.output_demux is None:  # not an MPI launcher: nothing to look for on PATH
                continue
            from distrun.agent.mpi_output import missing_launcher

            problem = missing_launcher(spec, process_tree.child_env(spec, base, "", plan.environment(spec)))
            if problem:
                raise CannotStart(f"node {node.node_rank}: {problem}")
