"""`azure.ai.ml`'s identity configurations for a job (`identity=` of `command(...)`).

distrun runs a job as the user who starts it; the identity a job names is recorded with the job
(and noted as having no effect here), so ported code that passes one keeps working.
"""

from __future__ import annotations

from typing import Any


class _IdentityConfiguration:
    type = ""

    def _to_data(self) -> dict[str, Any]:
        return {"type": self.type, **{k: v for k, v in vars(self).items() if v is not None}}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({shown})"


class UserIdentityConfiguration(_IdentityConfiguration):
    """Run as the submitting user's identity (what distrun always does)."""

    type = "user_identity"


class AmlTokenConfiguration(_IdentityConfiguration):
    type = "aml_token"


class ManagedIdentityConfiguration(_IdentityConfiguration):
    type = "managed"

    def __init__(self, *, client_id: str | None = None, resource_id: str | None = None, object_id: str | None = None):
        self.client_id = client_id
        self.resource_id = resource_id
        self.object_id = object_id
