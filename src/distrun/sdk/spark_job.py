"""The Spark job of the SDK: `spark(...)` and `SparkJob`, as in `azure.ai.ml`.

A `Spark` is a job the client submits as it submits a command job (it is one to the client: a
`Command` subclass); its data is a `type: spark` document, which the loader checks as a Spark
job file (`distrun.loading.spark_loader`). azure-ai-ml's shortcuts (`driver_cores`,
`executor_instances`, `dynamic_allocation_*`) are written into `conf` under Spark's own keys.
"""

from __future__ import annotations

from typing import Any

from distrun.sdk.command_job import Command
from distrun.sdk.plain import path_text, to_data

__all__ = ["Spark", "SparkJob", "spark"]

# azure-ai-ml's argument -> Spark's setting.
CONF_SHORTCUTS = {
    "driver_cores": "spark.driver.cores",
    "driver_memory": "spark.driver.memory",
    "executor_cores": "spark.executor.cores",
    "executor_memory": "spark.executor.memory",
    "executor_instances": "spark.executor.instances",
    "dynamic_allocation_enabled": "spark.dynamicAllocation.enabled",
    "dynamic_allocation_min_executors": "spark.dynamicAllocation.minExecutors",
    "dynamic_allocation_max_executors": "spark.dynamicAllocation.maxExecutors",
}
_LISTS = ("py_files", "jars", "files", "archives")


class Spark(Command):
    """A Spark job (`azure.ai.ml.entities.Spark` / `SparkJob`)."""

    type = "spark"

    def __init__(
        self,
        *,
        entry: dict[str, Any] | str | None = None,
        py_files: list[str] | None = None,
        jars: list[str] | None = None,
        files: list[str] | None = None,
        archives: list[str] | None = None,
        conf: dict[str, Any] | None = None,
        args: str | None = None,
        resources: dict[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        shortcuts = {CONF_SHORTCUTS[key]: settings.pop(key) for key in list(settings) if key in CONF_SHORTCUTS}
        self.entry = {"file": entry} if isinstance(entry, str) else entry
        self.py_files, self.jars, self.files, self.archives = py_files, jars, files, archives
        self.conf = {**{k: v for k, v in shortcuts.items() if v is not None}, **(conf or {})}
        self.args = args
        self.spark_resources = to_data(resources) if resources is not None else None
        super().__init__(**settings)

    def _name_hint(self) -> str:
        return self.name or "spark"

    def _to_data(self) -> dict[str, Any]:
        data = super()._to_data()
        for key in ("resources", "limits", "distribution"):  # a command job's, not a Spark job's
            data.pop(key, None)
        if self.entry is not None:
            data["entry"] = to_data(self.entry)
        for key in _LISTS:
            if getattr(self, key):
                data[key] = [path_text(item) for item in getattr(self, key)]
        if self.conf:
            data["conf"] = dict(self.conf)
        if self.args is not None:
            data["args"] = self.args
        if self.spark_resources:
            data["resources"] = self.spark_resources
        return data


SparkJob = Spark


def spark(**settings: Any) -> Spark:
    """Build a Spark job, as `azure.ai.ml.spark` does: code, entry, py_files, jars, files, archives,
    conf (or driver_cores, driver_memory, executor_cores, executor_memory, executor_instances,
    dynamic_allocation_*), args, inputs, outputs, environment, compute, resources, identity."""
    return Spark(**settings)
