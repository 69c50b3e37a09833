"""Load a Spark job (`type: spark`, a sparkJob `$schema`) into a `LoadedSparkJob`.

The job is checked as Azure ML checks one (its conf in `distrun.spec.spark_conf`; an entry that
is a file or a JVM class; data inputs and outputs in `direct` mode; `compute` or `resources`,
not both), then as the command job that runs it (`distrun.spec.spark_submit`) is: its
references, paths, code and environment, with every problem placed at the Spark job's own keys
(a reference in the command is one in `args`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from distrun.core.errors import Position, Problem, ValidationError
from distrun.loading import checks
from distrun.loading.raw_checks import in_file_order
from distrun.spec import models
from distrun.spec.loaded_spark import LoadedSparkJob
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.overrides import apply_overrides
from distrun.spec.source_map import SourceMap
from distrun.spec.spark_conf import conf_problems, local_cores
from distrun.spec.spark_models import SparkJobSpec
from distrun.spec.spark_submit import command_job

__all__ = ["is_spark_document", "load_spark_data", "loaded_spark_job", "spark_document_problems", "spark_problems"]

IDENTITY_NOTE = "identity is not used here: the job reads and writes its data as the user running distrun"
DIRECT_HINT = "Spark reads and writes the data itself: write `mode: direct`"


def is_spark_document(data: Any) -> bool:
    """A Spark job: `type: spark` (a spark component has a `version` too), or a sparkJob `$schema`."""
    if not isinstance(data, dict):
        return False
    schema = str(data.get("$schema") or "").lower().replace("_", "").replace("-", "").rsplit("/", 1)[-1]
    if "sparkjob" in schema:
        return True
    kind = data.get("type")
    return (
        isinstance(kind, str) and kind.lower() == "spark" and "version" not in data and "sparkcomponent" not in schema
    )


def load_spark_data(
    data: Any,
    base_dir: Path,
    source: str = "<python>",
    overrides: list[str] | tuple[str, ...] = (),
    smap: SourceMap | None = None,
) -> LoadedSparkJob:
    smap = smap or SourceMap(source)
    data = apply_overrides(data, smap, list(overrides))
    loaded = loaded_spark_job(data, base_dir, source, smap)
    problems = spark_problems(loaded)
    if problems:
        raise ValidationError(in_file_order(problems))
    return loaded


def loaded_spark_job(
    data: Any, base_dir: Path, source: str, smap: SourceMap, name: str | None = None
) -> LoadedSparkJob:
    """The Spark job `data` as its model reads it, not checked further (a pipeline's step once the
    pipeline was checked: what its inputs read exists only once the steps before it ran)."""
    try:
        spark = SparkJobSpec.model_validate(data)
    except ModelError as exc:
        raise ValidationError(in_file_order(translate(exc, data, smap, root=SparkJobSpec))) from None
    if name:
        spark = spark.model_copy(update={"name": name})
    cores = local_cores(spark.conf, os.cpu_count() or 1)
    spec = command_job(spark, f"local[{cores.given}]")
    return LoadedSparkJob(
        spec,
        base_dir,
        source,
        smap,
        spark=spark,
        local_cores=cores.given,
        local_note=cores.note,
        notes=(IDENTITY_NOTE,) if spark.identity else (),
    )


def spark_document_problems(document: Any, base_dir: Path, source: str, smap: SourceMap) -> list[Problem]:
    """The problems of a Spark job document (a pipeline's spark step), as its file would have."""
    try:
        load_spark_data(document, base_dir, source, smap=smap)
    except ValidationError as exc:
        return list(exc.problems)
    return []


def spark_problems(loaded: LoadedSparkJob) -> list[Problem]:
    """Every problem of a schema-valid Spark job, at its own keys."""
    spark, find = loaded.spark, loaded.source_map.find
    problems = [*_entry_problems(loaded), *conf_problems(spark.conf, find)]
    problems += _mode_problems(spark, find)
    if spark.compute and spark.resources:
        problems.append(
            Problem(
                "a Spark job names `compute` or `resources`, not both",
                "resources",
                find(("resources",)),
                "remove `resources` to run on the compute target, or `compute` to run here",
            )
        )

    def position(*path: str | int) -> Position:
        return find(("args",) if path[:1] == ("command",) else tuple(path))

    for problem in checks.semantic_problems(loaded.spec, loaded.base_dir, position):
        key = problem.key_path
        if _file_or_folder(problem):
            continue
        problems.append(
            dataclasses.replace(problem, key_path="args" + key[7:]) if key.startswith("command") else problem
        )
    return problems


def _file_or_folder(problem: Problem) -> bool:
    """A uri_file input that is a folder, or the reverse: Spark reads both in place (`direct`), and
    writes a uri_file output as a folder of part files, which the next step reads as its file."""
    message = problem.message
    return problem.key_path.endswith(".path") and (
        " is a uri_file but " in message or " is a uri_folder but " in message
    )


def _entry_problems(loaded: LoadedSparkJob) -> list[Problem]:
    entry, find = loaded.spark.entry, loaded.source_map.find
    if bool(entry.file) == bool(entry.class_name):
        return [
            Problem(
                "a Spark job's entry is a `file` or a `class_name`, one of the two",
                "entry",
                find(("entry",)),
                "e.g. entry: {file: main.py}, or entry: {class_name: org.example.Main} with the jar in `jars`",
            )
        ]
    if entry.class_name:
        if loaded.spark.jars:
            return []
        return [
            Problem(
                "a JVM entry (`class_name`) needs its jar in `jars`",
                "jars",
                find(("entry", "class_name")),
                "add `jars: [app.jar]` (relative to `code`)",
            )
        ]
    code = loaded.base_dir / (loaded.spark.code or ".")
    if entry.file and code.is_dir() and not (code / entry.file).is_file():
        return [
            Problem(
                f"the entry file {entry.file!r} is not in the code folder {str(code)!r}",
                "entry.file",
                find(("entry", "file")),
                "write the file's path relative to `code`",
            )
        ]
    return []


def _mode_problems(spark: SparkJobSpec, find: Any) -> list[Problem]:
    problems = []
    for kind, table in (("inputs", spark.inputs), ("outputs", spark.outputs)):
        for name, value in table.items():
            # A mode left out is Spark's own reading and writing (`direct`); a pipeline step's
            # input bound to another step's output has none.
            data = isinstance(value, (models.DataInput, models.OutputSpec)) and "mode" in value.model_fields_set
            if data and value.mode != "direct":  # type: ignore[union-attr]
                problems.append(
                    Problem(
                        f"{kind[:-1]} {name!r} is in {value.mode!r} mode; a Spark job's data is `direct`",  # type: ignore[union-attr]
                        f"{kind}.{name}.mode",
                        find((kind, name, "mode")),
                        DIRECT_HINT,
                    )
                )
    return problems
