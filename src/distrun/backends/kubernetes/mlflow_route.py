"""The MLflow variables a job's pods get, and what the plan says about their route. Pure.

Every process of a job gets its MLflow run's variables (`distrun.metrics.tracking`), by default
pointed at DISTRUN_HOME's server on 127.0.0.1 of the machine that submitted it. Pods run
elsewhere: there that URI is the pod itself, where MLflow's client would retry each call for
minutes before failing. So pods get the run only when its URI leads off the submitting machine
(DISTRUN_MLFLOW_HOST and DISTRUN_MLFLOW_ADVERTISE, or a tracking server of the user's own);
otherwise they get no MLflow variables, their MLflow calls stay inside the pod, and the plan
says what to set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from distrun.metrics.rank_route import (
    ADVERTISE_VARIABLE,
    HOST_VARIABLE,
    UNREACHABLE_URI,
    this_machine_only,
    url_host,
    wanted_address,
)


@dataclass(frozen=True)
class PodTracking:
    environment: dict[str, str]  # the MLflow variables every pod's processes get
    note: str | None  # what `distrun plan` says about the route (None: the job has no run)
    reached: bool  # False: the job's run stays empty (recorded in system_logs/metrics.txt at submit)


def pod_tracking(environment: Mapping[str, str]) -> PodTracking:
    """What the pods get of the job's MLflow variables (`environment`: the job's bindings')."""
    found = {key: value for key, value in environment.items() if key.startswith("MLFLOW_")}
    uri = found.get("MLFLOW_TRACKING_URI")
    if uri is None:
        return PodTracking({}, None, True)
    if uri == UNREACHABLE_URI:
        # No server could start (said at submit): the pods' calls fail at once there too.
        return PodTracking(found, None, True)
    run = f"the job's run {found['MLFLOW_RUN_ID']}" if found.get("MLFLOW_RUN_ID") else "the job's run"
    if not this_machine_only(uri):
        said = f"MLflow: every rank logs to {run} at {uri}; the pods must reach it"
        return PodTracking(found, said, True)
    note = (
        f"MLflow: the pods get no MLFLOW_* variables and {run} stays empty: its tracking URI "
        f"{uri} means this machine, and in a pod it would mean the pod. To record the pods' metrics, start "
        f"distrun with {HOST_VARIABLE}=ADDRESS (an interface of this machine the pods reach, 0.0.0.0 for all) "
        f"and {ADVERTISE_VARIABLE}=NAME (how the pods name it) while no MLflow server of this DISTRUN_HOME "
        "runs, or set MLFLOW_TRACKING_URI to a tracking server the pods reach"
    )
    return PodTracking({}, note, False)


def planned_uri(environ: Mapping[str, str], mlflow_on: bool) -> str | None:
    """For `distrun plan`, which creates no run: the tracking URI the job's run would have (a
    user's MLFLOW_TRACKING_URI, else distrun's server at the address a new one would get; its
    port is chosen when it starts), or None when no run would be made."""
    if not mlflow_on:
        return None
    given = environ.get("MLFLOW_TRACKING_URI")
    if given:
        return given
    return f"http://{url_host(wanted_address(environ)[1])}:PORT"
