"""A Spark standalone cluster as a compute target: `distrun compute create --type spark --set
master=spark://HOST:PORT`.

A Spark job on it runs `spark-submit --master spark://...` in **client** deploy mode: the driver
is the job's one process, supervised on this machine exactly as on local compute (this backend
is the local backend with its own settings), so its logs, cancel, `limits.timeout`,
`hang_timeout` and the no-orphan guarantees hold, and the executors the cluster started for it
end with the driver. Spark's standalone cluster deploy mode would put the driver on a worker,
out of distrun's reach, and it does not run Python applications at all. Only Spark jobs run on
such a target (`distrun.runner.jobs.check_target` says so for any other).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distrun.backends.base import RenderedJob
from distrun.backends.local.backend import LocalBackend, execute
from distrun.backends.settings import validated_settings
from distrun.backends.spark.executor_logs import ExecutorLogs, driver_ui
from distrun.backends.spark.live_output import ExecutorLines, SharedOutput
from distrun.plan.model import LaunchPlan
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

_MASTER = re.compile(r"spark://[A-Za-z0-9.\-]+:[0-9]{1,5}(,[A-Za-z0-9.\-]+:[0-9]{1,5})*")


class SparkSettings(BaseModel):
    """A Spark standalone cluster distrun submits Spark jobs to."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = "spark"
    type: str = Field("spark", pattern="^spark$")
    master: str = Field(description="the master's URL, spark://HOST:PORT (several for masters with standby)")
    driver_host: str | None = Field(
        None, description="the address the executors reach the driver at (spark.driver.host; default: Spark's choice)"
    )

    @field_validator("master")
    @classmethod
    def _master(cls, value: str) -> str:
        value = value.strip()
        if not _MASTER.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a Spark master's URL: write spark://HOST:PORT, e.g. spark://10.0.0.5:7077"
            )
        return value

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> SparkSettings:
        return validated_settings(cls, "spark", name, settings)


class SparkStandaloneBackend(LocalBackend):
    """The driver supervised here (client mode), the executors on the standalone cluster."""

    kind: ClassVar[str] = "spark"
    engine: ClassVar[str] = "Spark standalone"
    restarts: ClassVar[bool] = True
    settings_model: ClassVar[type[SparkSettings]] = SparkSettings  # type: ignore[assignment]
    launcher_module: ClassVar[str] = "distrun.backends.spark.launcher"

    def supervise(
        self,
        rendered: RenderedJob,
        layout: Layout,
        stream: BinaryIO,
        color: bool,
        on_plan: Callable[[LaunchPlan], None],
    ) -> JobRecord:
        """The driver supervised here as on local compute, the executors' logs followed beside it
        into the job's logs and the live stream (`[executor N]`)."""
        shared = SharedOutput(stream)
        lines = ExecutorLines(shared, color)
        follower = ExecutorLogs(rendered.job.folder.root, driver_ui(rendered.job.spec.command or ""), lines)
        follower.start()
        try:
            return execute(rendered.job, layout, stream=shared, color=color, on_plan=on_plan)  # type: ignore[arg-type]
        finally:
            follower.stop()
            lines.finish()


BACKEND = SparkStandaloneBackend()
