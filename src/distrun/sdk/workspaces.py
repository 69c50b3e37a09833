"""`MLClient.workspaces` and `Workspace`, as in `azure.ai.ml`: distrun has one workspace,
DISTRUN_HOME, under whatever name the notebook gives it.

Notebooks print a workspace's name and location, and read `mlflow_tracking_uri` to point MLflow
at it: that is distrun's own tracking store, the one every job's ranks log to.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from distrun.sdk.notices import Recorded

if TYPE_CHECKING:
    from distrun.store.layout import Layout

LOCATION = "local"  # where Azure ML names a region


class _Client(Protocol):
    workspace_name: str | None
    resource_group_name: str | None
    subscription_id: str | None

    @property
    def layout(self) -> Layout: ...


class Workspace(Recorded):
    """A workspace: its `name`; `location`, `resource_group` and the rest are plain values."""

    def __init__(
        self,
        *,
        name: str,
        description: str | None = None,
        tags: dict[str, str] | None = None,
        display_name: str | None = None,
        location: str | None = None,
        resource_group: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.description = description
        self.tags = tags or {}
        self.display_name = display_name or name
        self.location = location or LOCATION
        self.resource_group = resource_group
        self.id: str | None = None
        self.discovery_url: str | None = None
        self.mlflow_tracking_uri: str | None = None
        self._accept(kwargs)

    def __repr__(self) -> str:
        return f"Workspace(name={self.name!r}, location={self.location!r})"


class WorkspaceOperations:
    """`MLClient.workspaces`: get, list."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    def get(self, name: str | None = None, **kwargs: Any) -> Workspace:
        """The workspace `name` (default: the client's `workspace_name`, else "local"): DISTRUN_HOME."""
        return self._workspace(name or self._client.workspace_name or "local")

    def list(self, **kwargs: Any) -> list[Workspace]:
        return [self.get()]

    def _workspace(self, name: str) -> Workspace:
        from distrun.metrics.tracking import default_tracking_uri

        home = Path(self._client.layout.home)
        workspace = Workspace(
            name=name,
            description=f"distrun's store at {home}",
            resource_group=self._client.resource_group_name,
        )
        subscription = self._client.subscription_id or "local"
        group = self._client.resource_group_name or "local"
        workspace.id = (
            f"/subscriptions/{subscription}/resourceGroups/{group}"
            f"/providers/Microsoft.MachineLearningServices/workspaces/{name}"
        )
        workspace.mlflow_tracking_uri = default_tracking_uri(home)
        return workspace
