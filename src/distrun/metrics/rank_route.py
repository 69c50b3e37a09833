"""Which hosts can reach the MLflow tracking URI a job's ranks are given. Pure.

distrun's MLflow server listens on 127.0.0.1 unless DISTRUN_MLFLOW_HOST names another interface,
and a SQLite store is a file of this machine: such a URI reaches only ranks that run here. An
engine whose ranks never run here (Kubernetes pods) asks `this_machine_only` before passing it on.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

HOST_VARIABLE = "DISTRUN_MLFLOW_HOST"  # the interface distrun's server binds (default 127.0.0.1)
ADVERTISE_VARIABLE = "DISTRUN_MLFLOW_ADVERTISE"  # the name the ranks are given for it
# A URI whose calls fail at once where no server could be had at all: nothing listens on port 1
# of 127.0.0.1 (only root may bind it), and MLflow's client is told not to retry.
UNREACHABLE_URI = "http://127.0.0.1:1"
# Tracking URIs without a scheme that MLflow reads as a service's name, not as a folder.
_NAMED_SERVICES = ("databricks", "databricks-uc", "uc")
_FILE_SCHEMES = ("file", "sqlite")


def this_machine_only(uri: str) -> bool:
    """Whether `uri` means this machine itself: a file or folder here, or a loopback or
    wildcard address (which, used on another host, is that host)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in _FILE_SCHEMES or (not scheme and uri not in _NAMED_SERVICES):
        return True
    host = parts.hostname
    if host is None:
        return False  # a named service (databricks://PROFILE, azureml://...) MLflow resolves itself
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a host name: whoever resolves it decides
    return address.is_loopback or address.is_unspecified


def advertised_name(host: str, given: str | None) -> str:
    """The name put in the ranks' URI for a server bound to `host`: the one given, else the bound
    address, else (bound to every interface, 0.0.0.0 or ::) this machine's host name, since a
    wildcard address used on another host means that host."""
    if given:
        return given
    try:
        wildcard = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        wildcard = False
    return socket.gethostname() if wildcard else host


def wanted_address(environ: Mapping[str, str]) -> tuple[str, str]:
    """The interface a new server binds and the name the ranks are given for it, as
    DISTRUN_MLFLOW_HOST and DISTRUN_MLFLOW_ADVERTISE ask (127.0.0.1 for both when neither is set)."""
    host = environ.get(HOST_VARIABLE) or "127.0.0.1"
    return host, advertised_name(host, environ.get(ADVERTISE_VARIABLE))


def url_host(host: str) -> str:
    """A host as it stands in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host
