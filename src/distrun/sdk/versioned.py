"""What the SDK's registered assets (`Data`, `Model`) share: the reference a job input takes and
how they print."""

from __future__ import annotations

from typing import Any

from distrun.sdk.notices import Recorded
from distrun.sdk.plain import present


class VersionedAsset(Recorded):
    """A registered asset with a name and a version (set by the subclass's constructor)."""

    name: Any
    version: Any
    type: Any
    path: Any

    @property
    def id(self) -> str:
        """The reference a job input takes: `azureml:NAME:VERSION`."""
        return f"azureml:{self.name}:{self.version}"

    def __repr__(self) -> str:
        fields = present(name=self.name, version=self.version, type=self.type, path=self.path)
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"
