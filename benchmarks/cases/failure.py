"""B3 failure fan-out: 4 sleeping ranks, rank 2 exits 1 after 1 s; how fast does the gang stop?

Every rank writes time.time() at its own moments (see workloads/sleeper.py): rank 2 just
before its failing exit, the others when SIGTERM reaches them and just before they exit. From
those: failing exit to SIGTERM at every other rank, to every other rank gone, and to the
command returning. Rank 3 takes `term_delay` seconds to exit after SIGTERM (a checkpoint):
the command should return as soon as it is gone, well within the grace period.

Once on one node, once on 2 simulated nodes of 2 ranks (torchrun: two torchrun processes, one
per node, as users run it). A rank nobody stops ends by itself after `survivor_life` seconds;
a command still running at `peer_cap` is killed and shows as "never".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench import WORKLOADS, Bench
from benchmarks.cases.first_collective import read_stamps
from benchmarks.harness import Method, Run, alternate
from benchmarks.ports import free_port
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "failure fan-out"
FAIL_RANK = 2
SLOW_RANK = 3
GRACE = 5.0  # distrun's grace period in this case (limits.grace_period)
TERM = "fail to SIGTERM at every other rank s"
GONE = "fail to every other rank gone s"
RETURN = "fail to command return s"
LAG = "command return after the last rank gone s"
LEFT = "processes left running"
METRICS = (TERM, GONE, RETURN, LAG, LEFT)
MAX_FANOUT = 0.050  # the target


def _metrics(run: Run, out: Path, ranks: int) -> dict[str, float]:
    fail = read_stamps(out, "fail")
    if FAIL_RANK not in fail:
        raise RuntimeError(f"rank {FAIL_RANK} never reached its failure (stamps in {out})")
    failed_at = fail[FAIL_RANK]
    others = [r for r in range(ranks) if r != FAIL_RANK]
    term = read_stamps(out, "term")
    gone = read_stamps(out, "gone")
    # A rank killed without a word (SIGKILL) was gone by the time the command returned, at the latest.
    returned = math.inf if run.timed_out else run.ended
    last_gone = max(gone.get(r, returned) for r in others)
    return {
        TERM: max(term[r] if r in term else math.inf for r in others) - failed_at,
        GONE: last_gone - failed_at,
        RETURN: returned - failed_at,
        LAG: returned - last_gone,
        LEFT: float(run.leftovers),
    }


def _env(bench: Bench, out: Path) -> dict[str, str]:
    return {
        "BENCH_OUT": str(out),
        "BENCH_FAIL_RANK": str(FAIL_RANK),
        "BENCH_FAIL_AFTER": str(bench.sizes.failure_after),
        "BENCH_SLEEP": str(bench.sizes.survivor_life),
        "BENCH_SLOW_RANK": str(SLOW_RANK),
        "BENCH_TERM_DELAY": str(bench.sizes.term_delay),
    }


def _sampler(
    bench: Bench, what: str, argvs: Callable[[], list[list[str]]], distrun: bool, ranks: int, cwd: Path | None = None
) -> Callable[[], dict[str, float]]:
    def sample() -> dict[str, float]:
        out = bench.folder("b3-out")
        env = bench.distrun_env(_env(bench, out)) if distrun else bench.base_env(_env(bench, out))
        run, _ = bench.run(what, argvs(), env, cwd=cwd, timeout=bench.sizes.peer_cap, expect="any")
        return _metrics(run, out, ranks)

    return sample


def _methods(bench: Bench, nodes: int, per_node: int) -> list[Method]:
    ranks = nodes * per_node
    script = bench.workload("sleeper.py")
    job = bench.job_file(f"{bench.python} {script}", nodes=nodes, per_node=per_node, grace_period=GRACE)
    torchrun = bench.peers.torchrun
    if nodes == 1:

        def torchrun_argvs() -> list[list[str]]:
            return [[*torchrun, "--standalone", "--nproc-per-node", str(per_node), script]]

    else:

        def torchrun_argvs() -> list[list[str]]:
            port = str(free_port())
            return [
                [
                    *torchrun,
                    *("--nnodes", str(nodes), "--node-rank", str(node), "--nproc-per-node", str(per_node)),
                    *("--master-addr", "127.0.0.1", "--master-port", port, script),
                ]
                for node in range(nodes)
            ]

    methods = [Method(DISTRUN, _sampler(bench, "b3-distrun", lambda: [bench.distrun("run", str(job))], True, ranks))]
    if bench.wants("torchrun"):
        methods.append(
            Method(
                "torchrun" if nodes == 1 else f"torchrun x{nodes}",
                _sampler(bench, "b3-torchrun", torchrun_argvs, False, ranks),
                reps=None if nodes == 1 else 2,
            )
        )
    torchx = bench.peers.torchx
    if bench.wants("torchx") and torchx:

        def torchx_argvs() -> list[list[str]]:
            argv = [
                *torchx,
                "run",
                "-s",
                "local_cwd",
                "dist.ddp",
                "-j",
                f"{nodes}x{per_node}",
                "--script",
                "sleeper.py",
            ]
            if nodes > 1:
                argv[-2:-2] = ["--rdzv_port", str(free_port())]
            return [argv]

        methods.append(
            Method(
                "torchx",
                _sampler(bench, "b3-torchx", torchx_argvs, False, ranks, WORKLOADS),
                reps=None if nodes == 1 else 2,
            )
        )
    return methods


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B3", TITLE)
    ranks = bench.sizes.failure_ranks
    for nodes in (1, 2):
        per_node = ranks // nodes
        case = f"{ranks} ranks on {nodes} node{'s' if nodes > 1 else ''}"
        bench.log(f"  B3 {case}")
        methods = _methods(bench, nodes, per_node)
        reps = bench.reps(3)
        samples = alternate(methods, reps, bench.log)
        for method in methods:
            result.reps[f"{method.name} ({nodes} node{'s' if nodes > 1 else ''})"] = len(
                samples[method.name].values.get(TERM, [])
            )
            for metric in METRICS:
                result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
        _targets(result, case)
    result.notes += [
        f"rank {SLOW_RANK} takes {bench.sizes.term_delay:g} s to exit after SIGTERM; the others exit at once",
        f"distrun's grace period here: {GRACE:g} s (limits.grace_period); torchrun waits up to 30 s, TorchX 10 s",
        f"ranks nobody stops end by themselves {bench.sizes.survivor_life:g} s after they start; "
        f"a command still running {bench.sizes.peer_cap:g} s after its start is killed: 'never'",
        "'processes left running': still alive, from that command, after it returned (then killed by the harness)",
    ]
    return result


def _targets(result: CaseResult, case: str) -> None:
    fanout = result.row(case, DISTRUN, TERM)
    returned = result.row(case, DISTRUN, RETURN)
    lag = result.row(case, DISTRUN, LAG)
    if fanout is None or returned is None or lag is None:
        return
    result.targets.append(
        Target(
            "B3",
            f"under {MAX_FANOUT * 1000:.0f} ms from the failing exit to SIGTERM at every other rank ({case})",
            f"median {fanout.median * 1000:.1f} ms, max {fanout.high * 1000:.1f} ms",
            fanout.high < MAX_FANOUT,
        )
    )
    result.targets.append(
        Target(
            "B3",
            f"the command returns within the grace period ({GRACE:g} s) of the slowest rank ({case})",
            f"returned at most {returned.high:.2f} s after the failure, at most {lag.high * 1000:.0f} ms after the"
            " slowest rank was gone",
            returned.high <= GRACE,
        )
    )
