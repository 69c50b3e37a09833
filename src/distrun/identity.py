"""Stand-ins for `azure.identity` credentials: distrun needs no credential, and MLClient ignores them.

`from distrun.identity import DefaultAzureCredential` keeps `MLClient(DefaultAzureCredential(), ...)`
working unchanged.
"""

from __future__ import annotations

from typing import Any


class _NoCredential:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def get_token(self, *scopes: str, **kwargs: Any) -> None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DefaultAzureCredential(_NoCredential):
    pass


class InteractiveBrowserCredential(_NoCredential):
    pass


class AzureCliCredential(_NoCredential):
    pass


class ManagedIdentityCredential(_NoCredential):
    pass


__all__ = ["AzureCliCredential", "DefaultAzureCredential", "InteractiveBrowserCredential", "ManagedIdentityCredential"]
