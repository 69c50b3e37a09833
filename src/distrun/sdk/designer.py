"""mldesigner's `@command_component` for distrun: a Python function as a command component.

    from mldesigner import command_component, Input, Output      # distrun's `mldesigner` package

    @command_component(display_name="Train")
    def train_model(data: Input(type="uri_file"), epochs: int, model: Output(type="uri_folder"), lr=0.02) -> str:
        ...

The decorated function is a component (`distrun.sdk.components.Component`): called inside an
`@pipeline` function it is a step, as a component loaded from YAML is. Its declaration comes
from the signature: a parameter annotated `Input(...)` is that input, `Output(...)` that output;
`int`, `float`, `str`, `bool` (or, without an annotation, the default's type) an `integer`,
`number`, `string` or `boolean` input; a default is the input's default, a default of None
makes it optional. A return annotation adds the value output `output` (`string`, or the
annotation's type), as in mldesigner: the returned value is written to its file, and a step's
value input bound to it gets that value. Its code is the function's folder (or `code=`,
relative to it), and its command runs the function there, as Azure ML runs one:

    python -c "from mldesigner._cli.mldesigner_commands import main; main()" execute
        --source components.py --name train_model --inputs data=... epochs=... [lr=...] --outputs model=...

That entry is the one mldesigner's own `mldesigner` command runs, so the component runs the
same in distrun's Python (with distrun's `mldesigner`, `execute` below) and in an environment
that installs Microsoft's mldesigner (as the component's `environment=` may, to run on Azure ML).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.sdk.components import Component
from distrun.sdk.inputs_outputs import Input, Output
from distrun.sdk.notices import IgnoredArgumentWarning

RETURN_OUTPUT = "output"  # mldesigner's name for a function's return value
ENTRY = 'python -c "from mldesigner._cli.mldesigner_commands import main; main()" execute'
_LITERALS = {int: "integer", float: "number", str: "string", bool: "boolean"}


class FunctionComponent(Component):
    """A command component made from a Python function: a step names it inline (its document,
    `code` absolute), and `execute` runs the function itself."""

    def __init__(self, data: dict[str, Any], file: Path, function: Callable[..., Any]) -> None:
        super().__init__(data, file)
        self._inline = True  # its file is Python: a step names its document, registering records it
        self._function = function
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __repr__(self) -> str:
        return (
            f"CommandComponent(name={self.name!r}, function={self._function.__qualname__}, source={str(self._file)!r})"
        )


def command_component(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    display_name: str | None = None,
    description: str | None = None,
    is_deterministic: bool | None = None,
    tags: dict[str, Any] | None = None,
    environment: Any = None,
    code: str | None = None,
    distribution: Any = None,
    resources: Any = None,
    **kwargs: Any,
) -> Any:
    """`@command_component` or `@command_component(...)`: the function as a command component."""

    def decorate(function: Callable[..., Any]) -> FunctionComponent:
        from distrun.sdk.plain import to_data

        source = Path(inspect.getsourcefile(function) or "").resolve()
        folder = (source.parent / code).resolve() if code else source.parent
        if not source.is_relative_to(folder):
            raise DistrunError(
                f"@command_component {function.__name__}: its file {source} is not inside its code folder {folder}",
                "leave code= out (the function's folder), or give a folder that holds its file",
            )
        component = name or function.__name__
        inputs, outputs = _declared(function)
        data: dict[str, Any] = {
            "type": "command",
            "name": component,
            "version": version,
            "display_name": display_name,
            "description": description if description is not None else inspect.getdoc(function),
            "is_deterministic": is_deterministic,
            "tags": tags,
            "inputs": inputs,
            "outputs": outputs,
            "code": str(folder),
            "command": _command(source.relative_to(folder).as_posix(), component, inputs, outputs),
            "environment": _environment(environment, source.parent),
            "distribution": to_data(distribution) if distribution is not None else None,
            "resources": to_data(resources) if resources is not None else None,
        }
        if kwargs:
            from distrun.sdk.notices import note_ignored

            note_ignored("command_component", kwargs)
        return FunctionComponent({k: v for k, v in data.items() if v is not None}, source, function)

    return decorate(func) if func is not None else decorate


def _declared(function: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The component's inputs and outputs, from the function's signature."""
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    signature = inspect.signature(function)
    for param in signature.parameters.values():
        annotation, default = param.annotation, param.default
        if isinstance(annotation, Output):
            outputs[param.name] = {"type": annotation.type}
            continue
        if isinstance(annotation, Input):
            declared = {k: v for k, v in annotation._to_data().items() if k not in ("path", "default")}
        else:
            kind = annotation if annotation is not inspect.Parameter.empty else type(default)
            declared = {"type": _LITERALS.get(kind, "string")}  # type: ignore[call-overload]
        if default is None:
            declared["optional"] = True
        elif default is not inspect.Parameter.empty:
            declared["default"] = default
        inputs[param.name] = declared
    returned = signature.return_annotation
    if returned not in (inspect.Signature.empty, None):
        outputs[RETURN_OUTPUT] = {"type": _LITERALS.get(returned, "string")}
    return inputs, outputs


def _command(source: str, name: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> str:
    given = [
        f"$[[{k}=${{{{inputs.{k}}}}}]]" if decl.get("optional") else f"{k}=${{{{inputs.{k}}}}}"
        for k, decl in inputs.items()
    ]
    written = [f"{k}=${{{{outputs.{k}}}}}" for k in outputs]
    parts = [ENTRY, f"--source {source}", f"--name {name}"]
    if given:
        parts.append("--inputs " + " ".join(given))
    if written:
        parts.append("--outputs " + " ".join(written))
    return " ".join(parts)


def _environment(environment: Any, folder: Path) -> Any:
    """`environment=`: an environment YAML file (relative to the function's folder, as mldesigner
    reads it) as its document, a conda file in it made absolute; anything else as given."""
    from distrun.sdk.plain import to_data

    if environment is None:
        return None
    text = to_data(environment)
    if not isinstance(text, str) or text.startswith("azureml:") or not text.endswith((".yaml", ".yml")):
        return text
    from distrun.spec.yaml_source import parse_yaml_text

    path = (folder / text).resolve()
    try:
        document, _ = parse_yaml_text(path.read_text(encoding="utf-8"), str(path))
    except (OSError, DistrunError) as exc:
        raise DistrunError(
            f"@command_component environment={text!r}: cannot read {path}: {exc}",
            "give the path of an environment YAML file, relative to the component's Python file",
        ) from None
    if not isinstance(document, dict):
        raise DistrunError(f"@command_component environment={text!r}: {path} is not an environment (a mapping)")
    if isinstance(document.get("conda_file"), str):
        document["conda_file"] = str((path.parent / document["conda_file"]).resolve())
    document = {k: v for k, v in document.items() if not k.startswith("$")}
    if not _only_mldesigner(document.get("conda_file")):
        return document
    # Its conda file is there to put Microsoft's mldesigner (the `execute` entry Azure ML runs)
    # into the image; distrun's own `mldesigner` runs the function instead, in distrun's Python.
    # The image goes too: it has no distrun, so a container of it (local compute with a container
    # engine) could not run the step.
    from distrun.sdk.notices import say_once

    say_once(
        f"designer-env:{path}",
        f"@command_component environment={text!r}: its conda file only installs mldesigner, which distrun "
        "provides: the step runs in distrun's own Python environment, not in its image",
    )
    return None


def _only_mldesigner(conda: Any) -> bool:
    """Whether a conda file (inline) asks for nothing but a Python, pip and mldesigner."""
    deps = conda.get("dependencies") if isinstance(conda, dict) else None
    if not isinstance(deps, list):
        return False
    pip_lines: list[Any] = []
    for dep in deps:
        if isinstance(dep, dict) and list(dep) == ["pip"] and isinstance(dep["pip"], list):
            pip_lines += dep["pip"]
        elif not (isinstance(dep, str) and dep.split("=")[0].strip() in ("python", "pip")):
            return False
    return bool(pip_lines) and all(isinstance(line, str) and line.startswith("mldesigner") for line in pip_lines)


# ---------------------------------------------------------------- running one, in its step


def execute(source: str, name: str | None, inputs: dict[str, str], outputs: dict[str, str]) -> Any:
    """`mldesigner execute`: call the component `name` of the Python file `source` with these
    inputs (each converted to its declared type) and outputs; its return value is written to
    the file `output` of the output `output`, when the step has one."""
    path = Path(source).resolve()
    module_name = path.stem
    sys.path.insert(0, str(path.parent))  # the function may import its neighbours, as in mldesigner
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise DistrunError(f"mldesigner execute: {source} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    with warnings.catch_warnings():  # what building its components noted was said where the pipeline was built
        warnings.simplefilter("ignore", IgnoredArgumentWarning)
        spec.loader.exec_module(module)
    found = [v for v in vars(module).values() if isinstance(v, FunctionComponent)]
    chosen = [c for c in found if name is None or c.name == name][:1]
    if not chosen:
        known = ", ".join(str(c.name) for c in found) or "none"
        raise DistrunError(f"mldesigner execute: {source} has no component {name!r}", f"its components: {known}")
    component = chosen[0]
    args = {k: _typed(v, component.inputs[k].type) if k in component.inputs else v for k, v in inputs.items()}
    args.update({k: v for k, v in outputs.items() if k != RETURN_OUTPUT})
    result = component._function(**args)
    if RETURN_OUTPUT in outputs:
        target = Path(outputs[RETURN_OUTPUT])
        (target / RETURN_OUTPUT if target.is_dir() else target).write_text(str(result))
    return result


def _typed(text: str, value_type: str) -> Any:
    if value_type == "integer":
        return int(text)
    if value_type == "number":
        return float(text)
    if value_type == "boolean":
        return text.strip().lower() in ("true", "1", "yes")
    return text
