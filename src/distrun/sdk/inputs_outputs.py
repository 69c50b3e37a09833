"""`Input` and `Output`, as in `azure.ai.ml`: data inputs, typed literal inputs, outputs."""

from __future__ import annotations

from typing import Any

from distrun.sdk.notices import Recorded
from distrun.sdk.plain import present
from distrun.spec import models


class Input(Recorded):
    """A data input (`uri_folder`, `uri_file`, ...) or a typed literal (`integer`, `number`, ...)."""

    def __init__(
        self,
        *,
        type: str = "uri_folder",
        path: Any = None,
        mode: str | None = None,
        optional: bool | None = None,
        description: str | None = None,
        default: Any = None,
        datastore: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.type = type
        self.path = path
        self.mode = mode
        self.optional = optional
        self.description = description
        self.default = default
        self.datastore = datastore
        # min, max and enum describe a pipeline component's parameter; a job gets one value.
        self._accept(kwargs)

    @property
    def is_literal(self) -> bool:
        return self.type in models.LITERAL_INPUT_TYPES

    def _to_data(self) -> dict[str, Any]:
        if self.is_literal:
            return present(type=self.type, default=self.default, description=self.description, optional=self.optional)
        return present(
            type=self.type,
            path=self.path,
            mode=self.mode,
            description=self.description,
            optional=self.optional,
            datastore=self.datastore,
        )

    def __repr__(self) -> str:
        return f"Input({', '.join(f'{k}={v!r}' for k, v in self._to_data().items())})"


class Output(Recorded):
    def __init__(
        self,
        *,
        type: str = "uri_folder",
        path: Any = None,
        mode: str | None = None,
        description: str | None = None,
        name: str | None = None,
        version: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.type = type
        self.path = path
        self.mode = mode
        self.description = description
        self.name = name
        self.version = version
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        return present(
            type=self.type,
            path=self.path,
            mode=self.mode,
            description=self.description,
            name=self.name,
            version=self.version,
        )

    def __repr__(self) -> str:
        return f"Output({', '.join(f'{k}={v!r}' for k, v in self._to_data().items())})"


def input_from_data(value: Any) -> Any:
    """A loaded job's input as an SDK value: data inputs become `Input`, the rest stays plain."""
    if isinstance(value, dict) and models._input_kind(value) == "data":
        return Input(**value)
    return value


def output_from_data(value: Any) -> Any:
    return Output(**value) if isinstance(value, dict) else value
