"""Load a sweep job (YAML file) into a `LoadedSweep`: its trial a command job document, checked
as a command job file is checked.

Steps: read YAML with positions -> apply `--set` overrides -> the sweep's own schema -> each
search space expression, the sampling algorithm and the early termination policy, each by its
`type` -> the rules Azure ML sets between them (grid samples only `choice`, bayesian takes no
early termination, ...) -> the trial (inline, or a command component file) built into a command
job with the sweep's inputs, outputs and compute, `${{search_space.X}}` read as the input X ->
that job validated by the command job's model and checks, with each parameter at a value of its
range. Every problem is reported in one round, in file order, with file:line:col, key path and fix.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from distrun.core.errors import Problem, ValidationError
from distrun.loading.loader import candidate_problems
from distrun.loading.raw_checks import in_file_order
from distrun.spec import models, sweep_models
from distrun.spec.derived_names import sweep_name_problems, sweep_trial_count
from distrun.spec.loaded_pipeline import LoadedComponent
from distrun.spec.loaded_sweep import LoadedSweep
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.overrides import overridden_mapping
from distrun.spec.paths import local_path
from distrun.spec.pipeline_steps import FROM_COMPONENT, copy_positions
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path
from distrun.spec.sweep_ranges import range_problems
from distrun.spec.sweep_sections import SweepSections, rekeyed, rule_problems

__all__ = ["load_sweep_data"]

_SEARCH_REF = re.compile(r"\$\{\{\s*search_space\.([^}\s]*)\s*\}\}")
# What an inline trial may say: a command job's own keys. The sweep's top level has the rest.
TRIAL_KEYS = (*FROM_COMPONENT, "type", "$schema", "description", "limits")
SWEEP_LEVEL_KEYS = ("inputs", "outputs", "compute", "name", "display_name", "experiment_name", "tags")
GIVEN_TO_TRIALS = ("inputs", "outputs", "compute", "experiment_name", "tags")  # each trial names itself


def load_sweep_data(
    data: Any,
    base_dir: Path,
    source: str = "<python>",
    overrides: list[str] | tuple[str, ...] = (),
    smap: SourceMap | None = None,
    trial_component: LoadedComponent | None = None,
    unchecked: tuple[str, ...] = (),
) -> LoadedSweep:
    """`trial_component`: the trial's command component, loaded already (a pipeline's sweep step
    names it, inline or registered, and its pipeline loaded it); `trial:` then only labels it.
    `unchecked`: inputs whose data exists only later (a pipeline step's outputs that the sweep
    step reads, before that step ran): their paths are not checked."""
    smap = smap or SourceMap(source)
    data = overridden_mapping(data, smap, overrides, "a sweep job", "`type: sweep`, `trial:`")
    return _SweepLoader(data, base_dir, source, smap, trial_component, unchecked).load()


class _SweepLoader:
    def __init__(
        self,
        data: dict[str, Any],
        base_dir: Path,
        source: str,
        smap: SourceMap,
        trial_component: LoadedComponent | None = None,
        unchecked: tuple[str, ...] = (),
    ) -> None:
        self.data = data
        self.trial_component = trial_component
        self.unchecked = tuple(f"inputs.{name}.path" for name in unchecked)
        self.base_dir = base_dir
        self.source = source
        self.smap = smap
        self.problems: list[Problem] = []
        self.component_source: str | None = None
        self.undefined: list[str] = []  # parameters the trial's command reads that the search space lacks
        self.logbase: float | str | None = None  # random sampling's, which the trial is checked with

    def problem(self, message: str, path: KeyPath, hint: str) -> None:
        self.problems.append(Problem(message, format_key_path(path), self.smap.find(path), hint))

    def load(self) -> LoadedSweep:
        spec = self._sweep()
        sections = SweepSections(self.data, self.source, self.smap, self.problems)
        space = sections.search_space()
        algorithm = sections.typed("sampling_algorithm", sweep_models.ALGORITHMS, "random")
        policy = sections.typed("early_termination", sweep_models.POLICIES, None)
        self.problems += rule_problems(space, algorithm, policy, self.smap)
        space = self._sampleable(space, algorithm)
        trial, trial_base, trial_smap = self._trial(spec, space)
        if self.trial_component is None:  # a pipeline's sweep step: its trials' names are the pipeline's
            self.problems += self._name_problems()
        if self.problems or spec is None:
            raise ValidationError(self._ordered())
        return LoadedSweep(
            spec,
            self.base_dir,
            self.source,
            self.smap,
            space,
            algorithm,  # type: ignore[arg-type]
            policy,  # type: ignore[arg-type]
            trial,
            trial_base,
            trial_smap,
        )

    def _ordered(self) -> list[Problem]:
        """The sweep file's problems in file order, then the trial component's."""
        ordered = in_file_order(self.problems)
        return sorted(ordered, key=lambda p: bool(p.position and p.position.source == self.component_source))

    # ------------------------------------------------------------ the sweep's own keys

    def _sweep(self) -> sweep_models.SweepJob | None:
        try:
            return sweep_models.SweepJob.model_validate(self.data)
        except ModelError as exc:
            self.problems += translate(exc, self.data, self.smap, sweep_models.SweepJob)
            return None

    def _name_problems(self) -> list[Problem]:
        """The sweep's name (or one distrun generates) with its last trial's `.trial_N`."""
        name, limits = self.data.get("name"), self.data.get("limits")
        trials = sweep_trial_count(self.data.get("search_space"), self.data.get("sampling_algorithm", "random"), limits)
        if name is None:
            at = ("limits", "max_total_trials") if isinstance(limits, dict) and "max_total_trials" in limits else ()
            return sweep_name_problems(None, self.smap.find(at), trials, format_key_path(at))
        if isinstance(name, str) and re.fullmatch(models.JOB_NAME_PATTERN, name):
            return sweep_name_problems(name, self.smap.find(("name",)), trials)
        return []  # the model said what is wrong with it

    def _sampleable(self, space: dict[str, Any], algorithm: Any) -> dict[str, Any]:
        """The parameters whose every draw is a finite number; the others are said."""
        self.logbase = getattr(algorithm, "logbase", None)
        logbase = math.e if self.logbase == "e" else self.logbase
        kept = {}
        for name, expression in space.items():
            found = range_problems(name, expression, logbase, self.smap.find)
            self.problems += found
            if not found:
                kept[name] = expression
        return kept

    # ------------------------------------------------------------ the trial, as a command job

    def _trial(
        self, spec: sweep_models.SweepJob | None, space: dict[str, Any]
    ) -> tuple[dict[str, Any], Path, SourceMap]:
        raw = self.data.get("trial")
        if self.trial_component is not None:
            self.component_source = self.trial_component.source
            built = self._trial_of_component(self.trial_component, str(raw))
            document, base_dir, smap, prefix = built
        elif isinstance(raw, str):
            built = self._component_trial(raw)
            if built is None:
                return {}, self.base_dir, SourceMap(self.source)
            document, base_dir, smap, prefix = built
        elif isinstance(raw, dict):
            document, smap = self._inline_trial(raw)
            base_dir, prefix = self.base_dir, "trial"
        else:
            return {}, self.base_dir, SourceMap(self.source)  # the schema said what is wrong
        for key in GIVEN_TO_TRIALS:
            value = self.data.get(key)
            if value is not None:
                if key == "inputs":  # over a component trial's defaults
                    value = {**document.get("inputs", {}), **_absolute_inputs(value, self.base_dir)}
                document[key] = value
                copy_positions(self.smap, (key,), smap, (key,))
        limits = self.data.get("limits")
        if isinstance(limits, dict) and limits.get("trial_timeout") is not None:
            document["limits"] = {**document.get("limits", {}), "timeout": limits["trial_timeout"]}
            smap.set(("limits", "timeout"), self.smap.find(("limits", "trial_timeout")))
        document["command"] = self._search_references(document.get("command"), space, smap, prefix)
        self._clashes(document, space)
        self._check(document, space, base_dir, smap, prefix)
        return document, base_dir, smap

    def _inline_trial(self, raw: dict[str, Any]) -> tuple[dict[str, Any], SourceMap]:
        document: dict[str, Any] = {}
        for key, value in raw.items():
            if key in SWEEP_LEVEL_KEYS:
                self.problem(
                    f"a trial does not take `{key}`: the sweep's `{key}` is its trials'",
                    ("trial", key),
                    f"move `{key}` to the sweep's top level",
                )
            elif key in TRIAL_KEYS and key not in ("type", "$schema"):
                document[key] = value
            elif key not in ("type", "$schema"):
                document[key] = value  # the command job's model says it is unknown, with its hint
        smap = SourceMap(self.source)
        copy_positions(self.smap, ("trial",), smap, ())
        return document, smap

    def _component_trial(self, ref: str) -> tuple[dict[str, Any], Path, SourceMap, str] | None:
        """`trial: ./train.yml`: a command component, its declared inputs given by the sweep's
        inputs and parameters (or their defaults)."""
        from distrun.loading.component_reader import load_component_file
        from distrun.spec.pipeline_models import CommandComponent

        path = local_path(self.base_dir, ref.removeprefix("file:"))
        if path is None or not path.is_file():
            self.problem(
                f"trial {ref!r} is not a component file on this machine",
                ("trial",),
                "write the trial inline (command:, code:, environment:) or name a command component file: ./train.yml",
            )
            return None
        self.component_source = str(path)
        try:
            component = load_component_file(path)
        except ValidationError as exc:
            self.problems += exc.problems
            return None
        if not isinstance(component.spec, CommandComponent):
            self.problem("a trial is a command component", ("trial",), "name a `type: command` component file")
            return None
        return self._trial_of_component(component, ref)

    def _trial_of_component(self, component: LoadedComponent, ref: str) -> tuple[dict[str, Any], Path, SourceMap, str]:
        """The trial's command job of a command component, its declared inputs given by the
        sweep's inputs and parameters (or their defaults)."""
        document = {key: component.data[key] for key in FROM_COMPONENT if key in component.data}
        if isinstance(document.get("code"), str):
            document["code"] = str(local_path(component.base_dir, document["code"]) or document["code"])
        smap = SourceMap(component.source)
        copy_positions(component.source_map, (), smap, ())
        declared = component.spec.inputs
        given = self.data.get("inputs") if isinstance(self.data.get("inputs"), dict) else {}
        space = self.data.get("search_space") if isinstance(self.data.get("search_space"), dict) else {}
        for name in given:
            if name not in declared and name not in space:
                self.problem(
                    f"input {name!r} is not an input of the trial's component {ref}",
                    ("inputs", name),
                    f"its inputs: {', '.join(declared) or 'none'}",
                )
        for name in space:
            if name not in declared:
                self.problem(
                    f"search space parameter {name!r} is not an input of the trial's component {ref}",
                    ("search_space", name),
                    f"a component trial's parameters are its inputs: {', '.join(declared) or 'none'}",
                )
        defaults = {
            name: decl.default
            for name, decl in declared.items()
            if name not in given and name not in space and decl.default is not None
        }
        if defaults:
            document["inputs"] = defaults
        return document, component.base_dir, smap, ""

    def _search_references(self, command: Any, space: dict[str, Any], smap: SourceMap, prefix: str) -> Any:
        """`${{search_space.X}}` -> `${{inputs.X}}`; an undefined parameter is a problem."""
        if not isinstance(command, str):
            return command

        def rewrite(match: re.Match[str]) -> str:
            name = match.group(1)
            named = list(self.data.get("search_space") or {})
            if name not in named:
                import difflib

                self.undefined.append(name)
                close = difflib.get_close_matches(name, named, n=1, cutoff=0.6)
                mean = f"did you mean search_space.{close[0]}? " if close else ""
                self.problems.append(
                    Problem(
                        f"${{{{search_space.{name}}}}} refers to an undefined search space parameter {name!r}",
                        f"{prefix}.command" if prefix else "command",
                        smap.find(("command",)),
                        f"{mean}add `{name}` under `search_space:`",
                    )
                )
            return "${{inputs." + name + "}}"

        return _SEARCH_REF.sub(rewrite, command)

    def _clashes(self, document: dict[str, Any], space: dict[str, Any]) -> None:
        inputs = self.data.get("inputs") if isinstance(self.data.get("inputs"), dict) else {}
        for name in space:
            if name in inputs:
                self.problem(
                    f"{name!r} is both an input and a search space parameter",
                    ("inputs", name),
                    "a parameter is its trials' input of that name: remove one of them, or rename it",
                )

    def _check(
        self, document: dict[str, Any], space: dict[str, Any], base_dir: Path, smap: SourceMap, prefix: str
    ) -> None:
        """The trial's job validated as a job file, each parameter at a value of its range."""
        from distrun.plan.sweep_search import example_value

        inputs = dict(document.get("inputs") or {})
        # Every parameter named (one whose expression is wrong too: that is said once, above).
        named = [*(self.data.get("search_space") or {}), *self.undefined]
        inputs.update(dict.fromkeys(named, 0))
        inputs.update({name: example_value(expression, self.logbase) for name, expression in space.items()})
        candidate = {**document, "inputs": inputs}
        for name in space:
            smap.set(("inputs", name), self.smap.find(("search_space", name)))
        found = candidate_problems(candidate, base_dir, self.source, smap)
        at_sweep = ("inputs", "outputs", "compute", "experiment_name", "display_name", "tags", "limits.timeout")
        for problem in found:
            key = problem.key_path
            if self.unchecked and key.startswith(self.unchecked):
                continue
            if key.startswith("limits.timeout"):
                self.problems.append(replace(problem, key_path="limits.trial_timeout"))
            elif key.startswith(at_sweep) or not prefix:
                self.problems.append(problem)
            else:
                self.problems.append(rekeyed(problem, prefix))


def _absolute_inputs(inputs: Any, base_dir: Path) -> Any:
    """Local data inputs' paths made absolute: a component trial's relative paths start elsewhere."""
    if not isinstance(inputs, dict):
        return inputs
    found = {}
    for name, value in inputs.items():
        if isinstance(value, dict) and isinstance(value.get("path"), str):
            local = local_path(base_dir, value["path"])
            value = {**value, "path": str(local) if local is not None else value["path"]}
        found[name] = value
    return found
