"""Early termination of a sweep's trials, as Azure ML defines its policies: pure decisions over
each trial's primary metric values, one per interval (each time the trial logged the metric).

A policy is applied to a trial when it logged its n-th value, with n at least
`delay_evaluation` and a multiple of `evaluation_interval` (Azure ML's example: interval 1,
delay 5 applies it at every interval from the 5th). At interval n:

- **bandit**: the best value any trial had at its n-th interval; a trial whose n-th value is
  worse than that by more than the slack is stopped (minimize: value > best x (1 + slack_factor),
  or value > best + slack_amount; maximize: value < best / (1 + slack_factor), or < best - slack_amount).
- **median_stopping**: the running average of the first n values of each trial that reached
  interval n (this one included); a trial whose best value so far is worse than their median is
  stopped. It needs two trials at least.
- **truncation_selection**: the trials that reached interval n, ranked by their n-th value; the
  lowest `truncation_percentage` percent of them (rounded down) are stopped when this trial is
  one of them. `exclude_finished_jobs` leaves ended trials out of the ranking.

A value that is no number (NaN, an infinity: a trial that diverged) never ranks and never
decides: it is left out of every best, median and ranking, and a trial whose own value at the
interval is one is not judged there (a diverged minimize trial would otherwise be the best, or
stop every other).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Mapping, Sequence

from distrun.spec.sweep_models import BanditPolicy, MedianStoppingPolicy, Policy, TruncationSelectionPolicy


def rankable(value: object) -> bool:
    """Whether a metric value can rank a trial or drive a policy: a finite number."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _n(value: float) -> str:
    return f"{value:.4g}"


def applies_at(policy: Policy, interval: int) -> bool:
    """Whether the policy is evaluated when a trial logged its `interval`-th value (1-based)."""
    return interval >= 1 and interval >= policy.delay_evaluation and interval % policy.interval == 0


def stop_reason(
    policy: Policy,
    goal: str,
    values: Mapping[str, Sequence[float]],
    trial: str,
    interval: int,
    ended: Collection[str] = (),
) -> str | None:
    """Why `trial` is stopped at `interval` (its values[trial] has that many values at least), or None.

    `values`: each trial's primary metric values, in the order logged. `ended`: trials that ended."""
    if not applies_at(policy, interval):
        return None
    at_n = {
        name: list(history)[interval - 1]
        for name, history in values.items()
        if len(history) >= interval and rankable(list(history)[interval - 1])
    }
    if trial not in at_n:
        return None  # its own value there is no number: nothing to judge it by
    mine = at_n[trial]
    head = f"stopped early by {policy.type.replace('_', ' ')} policy at interval {interval}"
    maximize = goal == "maximize"
    if isinstance(policy, BanditPolicy):
        best = max(at_n.values()) if maximize else min(at_n.values())
        if policy.slack_factor is not None:
            factor = 1 + policy.slack_factor
            if maximize and mine < best / factor:
                return f"{head}: {_n(mine)} < best {_n(best)} / {_n(factor)}"
            if not maximize and mine > best * factor:
                return f"{head}: {_n(mine)} > best {_n(best)} x {_n(factor)}"
            return None
        amount = policy.slack_amount or 0.0
        if maximize and mine < best - amount:
            return f"{head}: {_n(mine)} < best {_n(best)} - {_n(amount)}"
        if not maximize and mine > best + amount:
            return f"{head}: {_n(mine)} > best {_n(best)} + {_n(amount)}"
        return None
    if isinstance(policy, MedianStoppingPolicy):
        reached = [
            list(history)[:interval]
            for history in values.values()
            if len(history) >= interval and all(rankable(value) for value in list(history)[:interval])
        ]
        own = list(values[trial])[:interval]
        if len(reached) < 2 or not all(rankable(value) for value in own):
            return None
        median = statistics.median(sum(history) / interval for history in reached)
        best = max(own) if maximize else min(own)
        if (best < median) if maximize else (best > median):
            return f"{head}: best {_n(best)} {'<' if maximize else '>'} median of running averages {_n(median)}"
        return None
    if isinstance(policy, TruncationSelectionPolicy):
        ranked = {name: value for name, value in at_n.items() if not (policy.exclude_finished_jobs and name in ended)}
        if trial not in ranked:
            return None
        cut = len(ranked) * policy.truncation_percentage // 100
        # Worst first; ties keep the trials' order (the earlier trial ranks as worse).
        worst = sorted(ranked, key=lambda name: ranked[name], reverse=not maximize)[:cut]
        if trial in worst:
            place = list(sorted(ranked, key=lambda name: ranked[name], reverse=maximize)).index(trial) + 1
            return (
                f"{head}: {_n(mine)} is in the lowest {policy.truncation_percentage}% (rank {place} of {len(ranked)})"
            )
        return None
    return None
