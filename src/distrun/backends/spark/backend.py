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
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distrun.backends.local.backend import LocalBackend
from distrun.backends.settings import validated_settings

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


BACKEND = SparkStandaloneBackend()
