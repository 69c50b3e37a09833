"""Small helpers that turn SDK objects into the plain data the job loader reads."""

from __future__ import annotations

import os
from typing import Any


def path_text(value: Any) -> Any:
    """`pathlib.Path` (any os.PathLike) as text; everything else unchanged."""
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def present(**fields: Any) -> dict[str, Any]:
    """The fields that were given (not None), paths as text."""
    return {key: path_text(value) for key, value in fields.items() if value is not None}


def to_data(value: Any) -> Any:
    """An SDK object's job data, or the value itself (plain data passes through to the loader)."""
    convert = getattr(value, "_to_data", None)
    return convert() if callable(convert) else path_text(value)


def yaml_text(data: Any) -> str:
    """Plain data as YAML, keys in their order (how azure-ai-ml prints its entities)."""
    import io

    from ruamel.yaml import YAML

    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 120
    yaml.representer.sort_base_mapping_type_on_output = False  # type: ignore[attr-defined]
    yaml.dump(data, out)
    return out.getvalue()


class AttrDict(dict):  # type: ignore[type-arg]
    """`job.inputs.epochs` as well as `job.inputs["epochs"]`, as in azure-ai-ml."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value
