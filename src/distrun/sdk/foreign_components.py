"""Components of Microsoft's mldesigner that a distrun `@pipeline` function would call.

Where Microsoft's mldesigner is installed, `from mldesigner import command_component` is its own
(distrun's is the distribution distrun-mldesigner, for a Python without it), and a function it
decorates is an Azure ML component: called in a distrun pipeline's body it makes no distrun
step, and without azure-ai-ml it even runs the function itself, then and there. So the names the
body reads are looked at before it runs, and such a component is named in a clear error.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

from distrun.core.errors import DistrunError

# What Microsoft's `@command_component` marks its functions with (distrun's components are not
# functions but `FunctionComponent`s, which have no such attribute).
_MICROSOFT_MARK = "_is_mldesigner_component"


def _code_names(code: types.CodeType) -> set[str]:
    """The global and attribute names a code object and the functions inside it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _read_values(function: Callable[..., Any]) -> Iterator[tuple[str, Any]]:
    """(name as written, value) of each global, closure variable and module attribute the body reads."""
    code = function.__code__  # type: ignore[attr-defined]
    names = _code_names(code)
    seen: dict[str, Any] = {n: function.__globals__[n] for n in names if n in function.__globals__}  # type: ignore[attr-defined]
    for name, cell in zip(code.co_freevars, function.__closure__ or (), strict=False):  # type: ignore[attr-defined]
        try:
            seen[name] = cell.cell_contents
        except ValueError:  # a closure variable not yet bound
            continue
    for name, value in seen.items():
        yield name, value
        if isinstance(value, types.ModuleType):  # `components.train_model(...)`
            for attr in names:
                if attr in vars(value):
                    yield f"{name}.{attr}", vars(value)[attr]


def microsoft_components(function: Callable[..., Any]) -> list[str]:
    """The names (as the body writes them) of Microsoft's mldesigner components it reads."""
    if not isinstance(function, types.FunctionType):
        return []
    return sorted({name for name, value in _read_values(function) if _is_microsofts(value)})


def _is_microsofts(value: Any) -> bool:
    try:
        return getattr(value, _MICROSOFT_MARK, None) is True
    except Exception:  # an object whose attribute lookup fails its own way (a KeyError) is no component
        return False


def refuse_microsoft_components(function: Callable[..., Any]) -> None:
    """A clear error, before the body runs, when a pipeline function calls Microsoft's components."""
    found = microsoft_components(function)
    if found:
        which = f"{found[0]} is a component" if len(found) == 1 else f"{', '.join(found)} are components"
        raise DistrunError(
            f"@pipeline {function.__name__}: {which} of Microsoft's mldesigner (installed in this Python), "
            "which distrun does not run",
            "distrun runs the same component file with its own `mldesigner`, the distribution distrun-mldesigner, "
            "in a Python without Microsoft's mldesigner (docs/sdk.md, 'Components from Python functions')",
        )
