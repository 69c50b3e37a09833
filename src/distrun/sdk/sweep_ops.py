"""What `MLClient.jobs` does with a sweep job: the CLI's own path, called from Python.

    SweepJob._to_data()  (the sweep YAML document)
      -> distrun.loading.sweep_loader.load_sweep_data  (the one validation path)
      -> distrun.runner.parent_run.start_detached  (as `distrun run -d sweep.yml`)

so a sweep built in Python is recorded, run, listed and followed exactly like a YAML one; its
document is kept in its folder as `sweep.yml`.
"""

from __future__ import annotations

from typing import Any

from distrun.sdk.sweep_job import SweepJob
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

__all__ = ["submit_sweep", "sweep_of_record"]


def submit_sweep(job: SweepJob, layout: Layout, compute: str | None) -> JobRecord:
    """Validate the sweep (its trial as a command job, its compute) and start it in the background."""
    from distrun.runner.parent_run import ParentRun, start_detached

    source = job._job_source()
    loaded = source.load()
    run = ParentRun.of(loaded, layout, lambda text: None, compute, job.name)
    return start_detached(run, None, [], document=source.data, base_dir=source.base_dir)


def sweep_of_record(record: JobRecord, folder: Any) -> SweepJob:
    """A recorded sweep as a `SweepJob`: its settings, status, each trial's state (`steps`) and
    the best trial (`best_trial`; `properties["best_child_run_id"]` its job, as Azure ML names it;
    `outputs` its outputs)."""
    from distrun.sdk import sweep_space as space
    from distrun.sdk.inputs_outputs import Output
    from distrun.sdk.job_header import submitted_state

    sweep = record.sweep or {}
    best = sweep.get("best")
    job = SweepJob(
        search_space={k: space.from_data(v, space.EXPRESSIONS) for k, v in (sweep.get("search_space") or {}).items()},
        sampling_algorithm=space.from_data(sweep.get("sampling_algorithm") or "random", space.ALGORITHMS),
        objective=sweep.get("objective"),
        early_termination=sweep.get("early_termination"),
        limits=space.SweepJobLimits(**(sweep.get("limits") or {})),
        outputs={k: Output(path=v) for k, v in ((best or {}).get("outputs") or {}).items()},
        compute=next((s["compute"] for s in (record.steps or {}).values() if s.get("compute")), None),
        tags=record.tags,
    )
    submitted_state(job, record, folder)
    algorithm = job.sampling_algorithm
    if isinstance(algorithm, space.RandomSamplingAlgorithm) and algorithm.seed is None:
        algorithm.seed = sweep.get("seed")  # the seed it drew: the same seed replays the sweep
    job.steps = dict(record.steps or {})
    job.best_trial = best
    if best:
        job.properties["best_child_run_id"] = best.get("job")
    return job
