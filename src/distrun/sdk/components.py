"""Components from Python, as in azure-ai-ml: `load_component(source="train.yml")` gives a
component to call inside an `@pipeline` function (each call is a step), and
`ml_client.components.create_or_update(component)` registers it where `distrun component create`
does, so a step names it as `azureml:NAME:VERSION`.

A component is its YAML document and where it came from. A step made by calling it names that
file (or the registered `azureml:NAME:VERSION`), exactly as a pipeline YAML's step would, so the
YAML loader reads the component itself, with its checks and messages.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind
from distrun.core.user_paths import current_folder
from distrun.sdk.inputs_outputs import Input, Output
from distrun.sdk.notices import caller_position
from distrun.sdk.pipeline_nodes import NodeOutputs, building
from distrun.sdk.plain import AttrDict, path_text, yaml_text

# Keys a step of a component may set besides its inputs and outputs (they become the step's keys).
STEP_SETTINGS = (
    "compute",
    "display_name",
    "description",
    "tags",
    "environment_variables",
    "resources",
    "distribution",
    "force_rerun",
)


def _default(declaration: dict[str, Any]) -> Any:
    """An input's default as the call's signature shows it (None for an optional input)."""
    if declaration.get("optional"):
        return None
    return declaration.get("default", inspect.Parameter.empty)


class Component:
    """A command component (`azure.ai.ml.entities.CommandComponent`), loaded from YAML or registered."""

    def __init__(
        self, data: dict[str, Any] | None = None, file: Path | None = None, reference: str | None = None, **fields: Any
    ) -> None:
        self._inline = data is None  # made in Python, as azure-ai-ml's CommandComponent(name=..., command=...)
        if data is None:
            data = _component_document(fields)
            file = Path(caller_position().source)  # where it was made: what its messages name
        elif fields:
            raise TypeError(f"Component() takes its fields or a loaded document, not both: {', '.join(fields)}")
        assert file is not None
        self._data = data
        self._file = file  # the component's YAML (a registered one: its recorded copy)
        self._reference = reference  # azureml:NAME:VERSION once registered
        self.type = str(data.get("type", "command"))
        self.name = data.get("name")
        self.version = None if data.get("version") is None else str(data["version"])
        self.display_name = data.get("display_name")
        self.description = data.get("description")
        self.tags = dict(data.get("tags") or {})
        self.command = data.get("command")
        self.code = data.get("code")
        self.environment = data.get("environment")
        self.is_deterministic = data.get("is_deterministic", True)
        self.inputs = AttrDict({k: Input(**v) for k, v in (data.get("inputs") or {}).items()})
        self.outputs = AttrDict({k: Output(**v) for k, v in (data.get("outputs") or {}).items()})
        self.__signature__ = inspect.Signature(
            [
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None if decl.get("optional") else decl.get("default", inspect.Parameter.empty),
                )
                for name, decl in (data.get("inputs") or {}).items()
            ]
        )

    @property
    def id(self) -> str | None:
        return self._reference

    @property
    def _func(self) -> Any:
        """azure-ai-ml's component function (`help(component._func)`): the call, with its inputs."""
        return self.__call__

    def _step_component(self) -> Any:
        """What a step's `component:` names: the registered component, else its file (its
        document, when it was made in Python)."""
        if self._reference is None and self._inline:
            return dict(self._data)
        return self._reference or str(self._file)

    def _yaml_text(self) -> str:
        """The component as the YAML `components.create_or_update` records: its file's text (its
        comments kept), or its document when it was made in Python or from a function."""
        if self._inline:
            return yaml_text(self._data)
        return self._file.read_text(encoding="utf-8")

    def __call__(self, *args: Any, **inputs: Any) -> ComponentNode:
        """A step running this component with these inputs (inside an `@pipeline` function)."""
        label = self.name or self._file.name
        if args:
            raise TypeError(f"{label}() takes its inputs by name, e.g. {label}({', '.join(self.inputs) or 'x'}=...)")
        unknown = [name for name in inputs if name not in self.inputs]
        if unknown:
            raise TypeError(
                f"{label}() got an unexpected input {unknown[0]!r}: the component's inputs are "
                f"{', '.join(self.inputs) or 'none'} ({self._file})"
            )
        return ComponentNode(self, inputs)

    def __str__(self) -> str:
        """The component as YAML (as azure-ai-ml prints it)."""
        return yaml_text(self._data)

    def __repr__(self) -> str:
        return f"CommandComponent(name={self.name!r}, version={self.version!r}, source={str(self._file)!r})"


CommandComponent = Component

# azure-ai-ml's CommandComponent(...) arguments distrun keeps in the component's document.
_FIELDS = (
    "name",
    "version",
    "display_name",
    "description",
    "tags",
    "is_deterministic",
    "inputs",
    "outputs",
    "command",
    "code",
    "environment",
    "environment_variables",
    "distribution",
    "resources",
)


def _component_document(fields: dict[str, Any]) -> dict[str, Any]:
    """A command component's document from azure-ai-ml's CommandComponent(...) arguments, checked
    as a component file is (its code folder made absolute against the current folder)."""
    from distrun.core.errors import ValidationError
    from distrun.loading.checks import reference_problems
    from distrun.loading.component_reader import load_component_data
    from distrun.sdk.notices import note_ignored
    from distrun.sdk.pipeline_nodes import absolute
    from distrun.sdk.plain import to_data

    kind = fields.pop("type", "command")
    note_ignored("CommandComponent", {k: v for k, v in fields.items() if k not in _FIELDS and v is not None})
    data: dict[str, Any] = {"type": kind}
    for key in _FIELDS:
        value = fields.get(key)
        if value is None:
            continue
        if key in ("inputs", "outputs"):
            value = {name: to_data(port) for name, port in value.items()}
        elif key == "code":
            value = absolute(value, current_folder())
        data[key] = to_data(value)
    # Its problems are said now, as load_component says a file's: the document's, then its command's.
    where = caller_position()
    spec = load_component_data(data, current_folder(), str(where)).spec
    problems = reference_problems(spec.command, spec.inputs, spec.outputs, lambda *key: where)
    if problems:
        raise ValidationError(problems)
    return data


class ComponentNode:
    """A step made by calling a component: its inputs, its outputs (`node.outputs.NAME`, to pass
    on or to change), and the step's own settings (`node.compute = "gpu"`)."""

    def __init__(self, component: Component, inputs: dict[str, Any]) -> None:
        self.component = component
        self.inputs = AttrDict(inputs)
        self.outputs = NodeOutputs(self, {name: Output(type=out.type) for name, out in component.outputs.items()})
        self.name: str | None = None  # the step's name, once its pipeline is built
        self.compute: str | None = None
        self.display_name: str | None = None
        self.description: str | None = None
        self.tags: dict[str, Any] = {}
        self.environment_variables: dict[str, Any] = {}
        self.resources: dict[str, Any] | None = None
        self.distribution: dict[str, Any] | None = None
        self.force_rerun: bool | None = None
        if component.type == JobKind.PARALLEL:  # `step.resources.instance_count = 2`, as on a parallel function's step
            from distrun.sdk.parallel_job import Resources

            self.resources = Resources()
        self._base_dir = current_folder()
        self._source_where = caller_position()  # a problem of this step points at this call
        pipeline = building()
        if pipeline is not None:
            pipeline.add(self)

    @property
    def type(self) -> str:
        return self.component.type

    def _name_hint(self) -> str:
        return str(self.component.name or self.component._file.stem)

    def sweep(self, *, primary_metric: str, goal: str, **settings: Any) -> Any:
        """The sweep of this component (its trial): its inputs set to a search space expression
        are the parameters; the other arguments are `Command.sweep`'s (`distrun.sdk.sweep_job.sweep_of`)."""
        from distrun.sdk.sweep_job import sweep_of

        return sweep_of(self, primary_metric=primary_metric, goal=goal, **settings)

    def _step_keys(self) -> dict[str, Any]:
        """What the step sets besides its inputs and outputs (of a parallel component's step, also
        its parallel settings set on it: `step.mini_batch_size = "1"`)."""
        from distrun.sdk.plain import to_data

        data: dict[str, Any] = {"type": self.type, "component": self.component._step_component()}
        settings = STEP_SETTINGS
        if self.type == JobKind.PARALLEL:
            from distrun.sdk.parallel_job import SETTINGS

            settings = tuple(key for key in (*STEP_SETTINGS, *SETTINGS) if key != "distribution")
        for key in dict.fromkeys(settings):
            value = getattr(self, key, None)
            if value not in (None, {}):
                data[key] = to_data(value)
        return data

    def __repr__(self) -> str:
        return f"ComponentNode({self.name or self._name_hint()}, inputs={dict(self.inputs)!r})"


def load_component(source: Any = None, **kwargs: Any) -> Component:
    """A command or pipeline component file, checked as `distrun component create` checks one
    (`params_override=[{"version": "2"}]` applied as `--set`)."""
    from distrun.loading.pipeline_loader import load_component_file

    if source is None:
        raise TypeError("load_component() needs source=: the path of a component YAML file")
    path = Path(path_text(source))
    if not path.is_file():
        raise DistrunError(
            f"load_component: {path} {'is a folder' if path.is_dir() else 'does not exist'}",
            "give the path of a command component YAML file (type: command)",
        )
    import json

    overrides = [f"{k}={json.dumps(v)}" for item in kwargs.pop("params_override", None) or [] for k, v in item.items()]
    loaded = load_component_file(path, overrides)
    if kwargs:
        from distrun.sdk.notices import note_ignored

        note_ignored("load_component", kwargs)
    return Component(loaded.data, path.resolve())


class ComponentOperations:
    """`MLClient.components`: register (create_or_update), get and list command components."""

    def __init__(self, client: Any) -> None:
        self._client = client

    @property
    def _home(self) -> Path:
        return self._client.layout.home

    def create_or_update(self, component: Component, *, version: str | None = None, **kwargs: Any) -> Component:
        """Register the component as NAME:VERSION (its file's `version`, else the next number),
        with a snapshot of its code folder, as `distrun component create` does."""
        from distrun.store.components import register_component

        component = _registrable(component)
        if not component.name:
            raise DistrunError(
                f"component {component._file} has no name", "add `name:` to its file, or set component.name"
            )
        source = component._file
        version = version or component.version
        data = {**component._data, "name": component.name}
        text = component._yaml_text()
        registered = register_component(self._home, data, text, source.parent, component.name, version)
        return self.get(registered.name, registered.version)

    def get(self, name: str, version: str | None = None, label: str | None = None) -> Component:
        """One registered version (default: the latest)."""
        from distrun.store.components import get_component

        registered = get_component(self._home, name, None if version is None else str(version), label)
        component = _registered_by_document(registered.file) or load_component(registered.file)
        component._reference = f"azureml:{registered.name}:{registered.version}"
        return component

    def list(self, name: str | None = None, **kwargs: Any) -> list[Component]:
        from distrun.store.components import list_components

        return [self.get(c.name, c.version) for c in list_components(self._home, name)]


def _registrable(component: Any) -> Component:
    """What `components.create_or_update` takes: a component (loaded, made in Python, or a
    function's from `@command_component`), or a `parallel_run_function`; anything else is said plainly."""
    from distrun.sdk.parallel_job import ParallelFunction

    if isinstance(component, Component):
        return component
    if isinstance(component, ParallelFunction):
        return _parallel_component(component)
    if callable(component) and hasattr(component, "_pipeline_function"):
        return _pipeline_component(component)
    raise TypeError(
        "components.create_or_update takes a component (load_component(...), CommandComponent(...), "
        f"an @command_component function or a parallel_run_function(...)), not {type(component).__name__}"
    )


def _registered_by_document(file: Path) -> Component | None:
    """A registered pipeline or parallel component (a step naming it is checked where its pipeline
    is); None for a command component, which load_component checks."""
    from distrun.core.safe_files import read_text
    from distrun.spec.yaml_source import parse_yaml_text

    document, _ = parse_yaml_text(read_text(file, 1 << 20), str(file))
    if not isinstance(document, dict) or document.get("type") not in ("pipeline", "parallel"):
        return None
    return Component(document, file)


def _parallel_component(function: Any) -> Component:
    """A `parallel_run_function(...)` as a `type: parallel` component, checked as `distrun
    component create` checks a parallel component file (its task's code folder made absolute)."""
    from distrun.loading.parallel_step import check_component_data

    data = function._component_data()
    for key in ("display_name", "description"):
        if getattr(function, key):
            data[key] = getattr(function, key)
    if function.tags:
        data["tags"] = dict(function.tags)
    where = caller_position()
    check_component_data(data, current_folder(), str(where))
    component = Component(data, Path(where.source))
    component._inline = True
    return component


def _pipeline_component(pipeline_function: Any) -> Component:
    """An `@pipeline` function as a pipeline component, as azure-ai-ml registers one: its
    parameters are its inputs (each of the type the steps read it as; a default kept), its
    returned outputs its outputs, its steps inline. It is built with a stand-in for each input."""
    from distrun.sdk.pipeline_nodes import PipelineInput
    from distrun.spec.loaded_pipeline import VALUE_STAND_INS

    function = pipeline_function._pipeline_function
    parameters = inspect.signature(function).parameters
    # First built with no values, to learn each input's type from the steps that read it...
    probe = pipeline_function(**{name: None for name in parameters})
    kinds: dict[str, str] = {}
    for node in probe.jobs.values():
        declared = getattr(getattr(node, "component", None), "inputs", {})
        for key, value in node.inputs.items():
            if isinstance(value, PipelineInput) and key in declared:
                kinds.setdefault(value._name, str(declared[key].type))
    # ...then with a stand-in of that type for each input, so that every step reads its inputs.
    stand_ins = {}
    for name in parameters:
        kind = kinds.get(name, "string")
        stand_ins[name] = VALUE_STAND_INS[kind] if kind in VALUE_STAND_INS else Input(type=kind)
    data = pipeline_function(**stand_ins)._component_data()
    for name, parameter in parameters.items():
        declaration: dict[str, Any] = {"type": kinds.get(name, data["inputs"][name]["type"])}
        if parameter.default is not inspect.Parameter.empty:
            if parameter.default is None:
                declaration["optional"] = True
            elif isinstance(parameter.default, (str, int, float, bool)):
                declaration["default"] = parameter.default
        data["inputs"][name] = declaration
    component = Component(data, Path(inspect.getsourcefile(function) or "<python>"))
    component._inline = True
    return component


__all__ = ["CommandComponent", "Component", "ComponentNode", "ComponentOperations", "load_component"]
