"""A compute target's settings, validated by the backend's pydantic model, errors in distrun's words."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from distrun.core.errors import DistrunError

Settings = TypeVar("Settings", bound=BaseModel)


def validated_settings(model: type[Settings], kind: str, name: str, settings: Mapping[str, Any]) -> Settings:
    """`model` filled from a target's settings; every mistake becomes one `DistrunError` with the known keys."""
    from pydantic import ValidationError as PydanticError

    known = sorted(model.model_fields)
    try:
        return model.model_validate({"name": name, **settings})
    except PydanticError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "settings"
            if err["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(err["loc"][0]), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                lines.append(f"unknown setting {key!r}{hint}")
            else:
                lines.append(f"{key}: {err['msg'].removeprefix('Value error, ')}")
        raise DistrunError(
            f"compute target {name!r} ({kind}): " + "; ".join(lines),
            f"settings of a {kind} target: " + ", ".join(k for k in known if k not in ("name", "type")),
        ) from None
