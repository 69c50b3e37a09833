"""A Spark job's `conf`, checked as Azure ML checks it, and the cores its local mode gets.

Azure ML refuses a Spark job whose driver and executors are not sized (`spark.driver.cores`,
`spark.driver.memory`, `spark.executor.cores`, `spark.executor.memory`, and without dynamic
allocation `spark.executor.instances`), dynamic allocation without its bounds
(`spark.dynamicAllocation.minExecutors`/`maxExecutors`, 0 < min <= max, the instances between
them), bounds without dynamic allocation, and data inputs or outputs in a mode other than
`direct` (Spark reads and writes the data itself). Pure functions over plain data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from distrun.core.errors import Position, Problem

DRIVER_CORES = "spark.driver.cores"
DRIVER_MEMORY = "spark.driver.memory"
EXECUTOR_CORES = "spark.executor.cores"
EXECUTOR_MEMORY = "spark.executor.memory"
EXECUTOR_INSTANCES = "spark.executor.instances"
DYNAMIC = "spark.dynamicAllocation.enabled"
MIN_EXECUTORS = "spark.dynamicAllocation.minExecutors"
MAX_EXECUTORS = "spark.dynamicAllocation.maxExecutors"
INITIAL_EXECUTORS = "spark.dynamicAllocation.initialExecutors"

_SIZES = (DRIVER_CORES, DRIVER_MEMORY, EXECUTOR_CORES, EXECUTOR_MEMORY)
_COUNTS = (DRIVER_CORES, EXECUTOR_CORES, EXECUTOR_INSTANCES, MIN_EXECUTORS, MAX_EXECUTORS, INITIAL_EXECUTORS)
_MEMORY = re.compile(r"[0-9]+[kmgtpKMGTP]?[bB]?")
_EXAMPLE = (
    "e.g. conf: {spark.driver.cores: 1, spark.driver.memory: 2g, spark.executor.cores: 2, "
    "spark.executor.memory: 2g, spark.executor.instances: 2}"
)

Find = Callable[[tuple[str, ...]], Position]


def dynamic_allocation(conf: Mapping[str, str]) -> bool:
    return conf.get(DYNAMIC, "false").strip().lower() == "true"


def _count(conf: Mapping[str, str], key: str) -> int | None:
    text = conf.get(key)
    return int(text) if text is not None and text.strip().isdigit() else None


def conf_problems(conf: Mapping[str, str], find: Find, where: tuple[str, ...] = ("conf",)) -> list[Problem]:
    """What Azure ML refuses in a Spark job's `conf` (`where`: the key path of the conf)."""

    def problem(key: str | None, message: str, hint: str) -> Problem:
        path = (*where, key) if key and key in conf else where
        return Problem(message, ".".join(path), find(path), hint)

    problems = [
        problem(key, f"{key} is {conf[key]!r}, not a whole number", f"write a count, e.g. {key}: 2")
        for key in _COUNTS
        if key in conf and _count(conf, key) is None
    ]
    problems += [
        problem(key, f"{key} is {conf[key]!r}, not an amount of memory", f"write e.g. {key}: 2g")
        for key in (DRIVER_MEMORY, EXECUTOR_MEMORY)
        if key in conf and not _MEMORY.fullmatch(conf[key].strip())
    ]
    if problems:
        return problems
    dynamic = dynamic_allocation(conf)
    required = (*_SIZES, *(() if dynamic else (EXECUTOR_INSTANCES,)))
    missing = [key for key in required if key not in conf]
    if missing:
        problems.append(
            problem(
                None, f"a Spark job's conf needs {', '.join(missing)}", f"size its driver and executors, {_EXAMPLE}"
            )
        )
    low, high, instances = _count(conf, MIN_EXECUTORS), _count(conf, MAX_EXECUTORS), _count(conf, EXECUTOR_INSTANCES)
    if not dynamic:
        problems += [
            problem(key, f"{key} is set but dynamic allocation is off", f"remove it, or set {DYNAMIC}: true")
            for key in (MIN_EXECUTORS, MAX_EXECUTORS)
            if key in conf
        ]
        return problems
    if low is None or high is None:
        problems.append(
            problem(
                None,
                f"dynamic allocation needs its bounds: {MIN_EXECUTORS} and {MAX_EXECUTORS}",
                f"add e.g. {MIN_EXECUTORS}: 1 and {MAX_EXECUTORS}: 4, or set {DYNAMIC}: false "
                f"with {EXECUTOR_INSTANCES}",
            )
        )
    elif not 0 < low <= high:
        problems.append(
            problem(
                MIN_EXECUTORS,
                f"{MIN_EXECUTORS} ({low}) must be above 0 and at most {MAX_EXECUTORS} ({high})",
                "e.g. minExecutors: 1, maxExecutors: 4",
            )
        )
    elif instances is not None and not low <= instances <= high:
        problems.append(
            problem(
                EXECUTOR_INSTANCES,
                f"{EXECUTOR_INSTANCES} ({instances}) is not between {MIN_EXECUTORS} ({low}) "
                f"and {MAX_EXECUTORS} ({high})",
                "set it within the bounds, or leave it out",
            )
        )
    return problems


@dataclass(frozen=True)
class LocalCores:
    """The cores Spark's local mode gets: what `conf` asks for, bounded by the machine."""

    asked: int  # the driver's cores plus every executor's
    given: int

    @property
    def note(self) -> str | None:
        if self.given >= self.asked:
            return None
        return (
            f"Spark runs in local mode with {self.given} cores: conf asks for {self.asked} "
            f"(the driver's and every executor's), this machine has {self.given}"
        )


def local_cores(conf: Mapping[str, str], machine_cores: int) -> LocalCores:
    """Driver plus executors' cores (the most executors dynamic allocation may start), at most the machine's."""
    executors = _count(conf, MAX_EXECUTORS) if dynamic_allocation(conf) else _count(conf, EXECUTOR_INSTANCES)
    asked = (_count(conf, DRIVER_CORES) or 1) + (_count(conf, EXECUTOR_CORES) or 1) * (executors or 1)
    return LocalCores(asked, max(1, min(asked, machine_cores)))
