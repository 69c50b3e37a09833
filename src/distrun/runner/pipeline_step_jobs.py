"""The job behind each step of a pipeline run: its own, or an earlier run's for a reused step; and
each sweep step's trials and best trial, as its sweep's record says.

The pipeline's policy (`distrun.runner.pipeline_policy`) decides which steps start and what their
ends mean; this keeps the books it reads from: which job's outputs a later step reads (a reused
step's are the earlier run's, `distrun.runner.pipeline_reuse`), the key of each step that ran
(recorded for later runs once it completed), and the lines a sweep step says of its trials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.runner.launcher_lines import LauncherLines
from distrun.runner.pipeline_sweeps import step_outcome, sweep_state
from distrun.runner.pipelines import step_job_name
from distrun.runner.summaries import best_text

if TYPE_CHECKING:
    from distrun.runner.parent_policy import Say
    from distrun.spec.loaded_pipeline import LoadedPipeline, UpstreamOutput
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout


class StepJobs:
    """Each step's job and reuse key, and each sweep step's state (its record's `sweep` field)."""

    def __init__(self, pipeline: LoadedPipeline, layout: Layout, say: Say, name: str) -> None:
        self.pipeline = pipeline
        self.layout = layout
        self.say = say
        self.name = name
        # The job whose outputs each step has (an earlier run's, for a reused step), and the key of
        # each step that ran, recorded for later runs once it completed.
        self.job_of = {step: step_job_name(name, step) for step in pipeline.steps}
        self.reused_from: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        # Each sweep step's trials and best trial, as its sweep's record says, and its sweep's
        # own event lines (its trials started, their metrics, their ends), said as the step's.
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.sweep_events: dict[str, LauncherLines] = {}

    def record_of(self, step: str) -> dict[str, Any]:
        """The step's fields of the pipeline's record that these books keep."""
        return {
            **({"sweep": self.sweeps.get(step)} if self.pipeline.steps[step].is_sweep else {}),
            "job": self.job_of[step],
            "reused": step in self.reused_from,
        }

    # ------------------------------------------------------------ reuse

    def value_of(self, upstream: UpstreamOutput, kind: str) -> Any:
        """The value a completed step wrote to a value output (its file's text, of the reading
        input's type), read through the safe path: the step's processes could write anything there."""
        from distrun.runner.pipelines import output_value

        return output_value(self.layout, self.job_of[upstream.step], upstream, kind)

    def reused(self, step: str, document: dict[str, Any]) -> bool:
        """Whether the step is reused (then its job is the earlier run's, said); otherwise its key
        is kept, to be recorded when it completed."""
        from distrun.runner.pipeline_reuse import DigestLimitError, earlier_run, pipeline_step_key
        from distrun.spec.pipeline_reuse import why_not_reused
        from distrun.store.index import JobIndex
        from distrun.store.step_reuse import completed_run

        pipeline_step = self.pipeline.steps[step]
        if not pipeline_step.is_deterministic:
            return False
        try:
            key = pipeline_step_key(pipeline_step, document, self.layout.home)
        except DigestLimitError as exc:
            self.say(f"[{step}] not reused: {exc.message}")
            return False
        if key is None:
            return False
        self.keys[step] = key
        why = why_not_reused(True, self.pipeline.spec.settings.force_rerun, pipeline_step.force_rerun)
        if why is not None:
            if completed_run(self.layout.home, key) is not None:
                self.say(f"[{step}] not reused: {why}")
            return False
        earlier, why = earlier_run(self.layout.home, key)
        if earlier is None:
            if why:
                self.say(f"[{step}] not reused: {why}")
            return False
        same, best = "same component, inputs and code", ""
        if pipeline_step.is_sweep:  # its outputs are its best trial's, which the record shows
            try:
                self.sweeps[step] = sweep_state(JobIndex(self.layout.db_path).get(earlier.job))
            except DistrunError as exc:  # removed since `earlier_run` read it
                self.say(f"[{step}] not reused: the earlier run {earlier.job} cannot be reused: {exc.message}")
                return False
            same, best = "same sweep, trial component, inputs and code", f": {best_text(self.sweeps[step])}"
        self.job_of[step] = earlier.job
        self.reused_from[step] = earlier.job
        self.say(f"[{step}] Reused: the outputs of job {earlier.job} ({same}){best}")
        return True

    def remember(self, step: str) -> None:
        """A completed step's key and outputs (a sweep step's: its best trial's), kept in the store
        for later runs to reuse."""
        from distrun.runner.pipeline_reuse import remember_step

        key = self.keys.get(step)
        if key is None:
            return
        outputs = self.pipeline.steps[step].document.get("outputs")
        names = list(outputs) if isinstance(outputs, dict) else []
        why = remember_step(self.layout.home, key, self.job_of[step], step, self.name, names)
        if why is not None:
            self.say(f"[{step}] cannot be reused later: {why}")

    # ------------------------------------------------------------ sweep steps

    def sweep_started(self, step: str, record: JobRecord) -> None:
        self.sweeps[step] = sweep_state(record)
        self.sweep_events[step] = LauncherLines(self.layout.job(record.name), record.name)

    def sweep_looked(self, step: str, record: JobRecord) -> bool:
        """Its sweep's event lines written since the last look, said as the step's (`[step]
        [trial_1] loss = 0.4 (interval 2)`); whether its state changed (a running sweep's record)."""
        self._say_events(step)
        if record.terminal:
            return False
        state = sweep_state(record)
        changed = state != self.sweeps[step]
        self.sweeps[step] = state
        return changed

    def _say_events(self, step: str) -> None:
        # Read up to its summary: its supervisor says each line before it records the sweep ended.
        events = self.sweep_events[step]
        try:
            lines = events.read()
        except OSError as exc:  # its folder is its trials' too: a link or a pipe is never read through
            self.say(f"[{step}] its trials' events are not shown: {exc}")
            return
        for line in lines:
            if line.strip():
                self.say(f"[{step}] {line.decode('utf-8', 'surrogateescape')}")

    def sweep_outcome(self, step: str, record: JobRecord) -> tuple[str, str | None]:
        self.sweeps[step] = sweep_state(record)  # its best trial, said as the step's outcome
        return step_outcome(record)

    def best(self, step: str) -> str:
        """`: <its best trial>` for a sweep step, said when it completed; "" for another step."""
        return f": {best_text(self.sweeps[step])}" if step in self.sweeps else ""
