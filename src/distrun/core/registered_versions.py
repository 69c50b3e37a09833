"""Which version of a registered asset (a data asset, a component) `azureml:NAME:VERSION` or
`azureml:NAME@LABEL` names, from the versions registered under NAME (oldest first). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from distrun.core.errors import DistrunError


class Versioned(Protocol):
    @property
    def version(self) -> str: ...


T = TypeVar("T", bound=Versioned)


def pick_version(kind: str, name: str, versions: Sequence[T], version: str | None, label: str | None, hint: str) -> T:
    """The one asked for; an error naming what there is otherwise (`hint`: how to register one)."""
    if not versions:
        raise DistrunError(f"there is no registered {kind} named {name!r}", hint)
    if version is not None:
        for registered in versions:
            if registered.version == version:
                return registered
        known = ", ".join(v.version for v in versions)
        raise DistrunError(
            f"{kind} {name} has no version {version!r} (versions: {known})", f"use azureml:{name}@latest"
        )
    if label not in (None, "latest"):
        raise DistrunError(
            f"{kind} label {label!r} is not known", f"use azureml:{name}@latest or azureml:{name}:VERSION"
        )
    return versions[-1]
