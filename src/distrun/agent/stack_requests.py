"""`distrun job stacks`: a request file in the job folder that every node agent of the job answers.

The protocol is files in the job folder, so it works wherever the asking distrun and the node
agents see the same folder (local compute; Slurm on a shared filesystem), and needs no port:

- the asker writes `stacks/requests/<id>` (16 hex digits; JSON: `{"native": false}`);
- every node agent lists `stacks/requests/` every POLL_SECONDS while its processes run, reads
  its own processes' stacks (`agent.stacks`, in a thread: the gang's loop never waits for
  py-spy) and writes `stacks/answers/<id>-node<k>.json` (`{"node_ranks": [...], "processes": [...]}`,
  k its first node rank);
- the asker waits until the answers cover every node of the plan, then removes its files.

A job's processes can write these folders too: a request they plant costs the job a stack read
(one at a time), and an answer they forge is read through the safe read path like any job file.
What an agent writes on such requests' behalf is bounded: it leaves at most
MAX_UNCOLLECTED_ANSWERS answers of its own in `stacks/answers/` that no asker has taken away
(further requests wait until askers remove theirs), each of at most ANSWER_LIMIT bytes (a larger
one says so instead of carrying the stacks), and it lists at most LIST_LIMIT names of a folder.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.agent.folder_writes import LIST_LIMIT, listed_beneath, remove_beneath, write_beneath
from distrun.core.safe_files import MAX_METADATA_BYTES, read_beneath

if TYPE_CHECKING:
    from distrun.agent.stacks import ProcessStacks

STACKS_FOLDER = "stacks"
REQUESTS = f"{STACKS_FOLDER}/requests"
ANSWERS = f"{STACKS_FOLDER}/answers"
POLL_SECONDS = 0.5
REQUEST_LIMIT = 4096
# Beyond the agents' own time (a poll, then py-spy's timeout for each batch of processes).
WAIT_MARGIN = 5.0
_WAIT_STEP = 0.1
# An agent's answers that no asker removed yet (an asker removes its own once every node
# answered): a real asker is a user's `job stacks`, the web UI or another node's hang verdict.
MAX_UNCOLLECTED_ANSWERS = 64
# One answer's bytes; the askers read answers up to this size.
ANSWER_LIMIT = MAX_METADATA_BYTES
_REQUEST_ID = re.compile(r"[0-9a-f]{16}")


def answer_name(request_id: str, node_rank: int) -> str:
    return f"{request_id}-node{node_rank}.json"


class StackRequestWatch:
    """The agent's side: which requests in the job folder it has not answered yet."""

    def __init__(self, job_root: Path, node_ranks: Sequence[int]) -> None:
        self.job_root = job_root
        self.node_ranks = sorted(node_ranks)
        self.next_poll = time.monotonic() + POLL_SECONDS
        self.answered: set[str] = set()
        self.own: set[str] = set()  # requests this agent wrote (a hang's read of the other nodes)

    def due(self, now: float) -> bool:
        return now >= self.next_poll

    def new_requests(self) -> list[tuple[str, bool]]:
        """(id, native) of each request not answered yet; marks the next poll."""
        self.next_poll = time.monotonic() + POLL_SECONDS
        names = [n for n in listed_beneath(self.job_root, REQUESTS) if _REQUEST_ID.fullmatch(n) and n not in self.own]
        self.answered &= set(names)  # a request the asker removed is forgotten
        found = []
        for name in sorted(set(names) - self.answered)[: self._room()]:
            try:
                data = json.loads(read_beneath(self.job_root, f"{REQUESTS}/{name}", REQUEST_LIMIT))
            except (OSError, ValueError):
                data = {}
            found.append((name, bool(data.get("native")) if isinstance(data, dict) else False))
        return found

    def _room(self) -> int:
        """How many more answers this agent may leave in the job folder now."""
        suffix = answer_name("", self.node_ranks[0])
        # Only this agent's own names count: answers forged under other nodes' names take none of its room.
        mine = sum(1 for n in listed_beneath(self.job_root, ANSWERS, LIST_LIMIT) if n.endswith(suffix))
        return max(0, MAX_UNCOLLECTED_ANSWERS - mine)

    def taken(self, request_id: str) -> None:
        self.answered.add(request_id)

    def answer(self, request_id: str, processes: list[ProcessStacks]) -> None:
        """Write this agent's answer; a job folder that refuses it leaves the asker to say a node did not answer."""
        body = answer_body(self.node_ranks, processes)
        try:
            write_beneath(self.job_root, ANSWERS, answer_name(request_id, self.node_ranks[0]), body)
        except OSError:
            pass


def answer_body(node_ranks: list[int], processes: list[ProcessStacks], limit: int = ANSWER_LIMIT) -> bytes:
    """An answer's JSON, at most `limit` bytes: stacks that would not fit are left out (each process says so)."""
    body = json.dumps({"node_ranks": node_ranks, "processes": [p.to_dict() for p in processes]}).encode()
    if len(body) <= limit:
        return body
    from distrun.agent.stacks import ProcessStacks

    said = f"its stacks were left out: this node's answer came to {len(body)} bytes, more than {limit}"
    short = [ProcessStacks(p.name, p.who, p.node_rank, p.pid, error=said) for p in processes]
    return json.dumps({"node_ranks": node_ranks, "processes": [p.to_dict() for p in short]}).encode()


def read_answer(job_root: Path, name: str, limit: int) -> dict[str, Any] | None:
    """An answer file, read safely; None when it is missing, unsafe or not an answer."""
    try:
        data = json.loads(read_beneath(job_root, f"{ANSWERS}/{name}", limit))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("node_ranks"), list):
        return None
    return data


def answer_wait(processes: int, reads_ahead: int = 1) -> float:
    """How long an asker waits for the agents: a poll, then py-spy's timeout for each batch of
    processes, for each read an agent may have to finish before it reads for this request."""
    from distrun.agent.stacks import DEFAULT_TIMEOUT, PARALLEL

    batches = math.ceil(max(processes, 1) / PARALLEL)
    return 2 * POLL_SECONDS + reads_ahead * DEFAULT_TIMEOUT * batches + WAIT_MARGIN


def ask_nodes(
    job_root: Path,
    request_id: str,
    nodes: Collection[int],
    wait: float,
    *,
    native: bool = False,
    stop: Callable[[], bool] | None = None,
) -> tuple[list[ProcessStacks], list[int]]:
    """Ask the agents of `nodes` for their processes' stacks; (what they answered, the nodes that did not).

    OSError when the request cannot be written. The request and its answers are removed after.
    """
    from distrun.agent.stacks import ProcessStacks

    write_beneath(job_root, REQUESTS, request_id, json.dumps({"native": native}).encode())
    give_up = time.monotonic() + wait
    answers: dict[str, dict[str, Any]] = {}
    try:
        while time.monotonic() < give_up and not (stop is not None and stop()):
            for file in listed_beneath(job_root, ANSWERS):
                if file.startswith(f"{request_id}-") and file not in answers:
                    found = read_answer(job_root, file, MAX_METADATA_BYTES)
                    if found is not None:
                        answers[file] = found
            if set(nodes) <= _covered(answers):
                break
            time.sleep(_WAIT_STEP)
    finally:
        remove_beneath(job_root, REQUESTS, [request_id])
        remove_beneath(
            job_root, ANSWERS, [f for f in listed_beneath(job_root, ANSWERS) if f.startswith(f"{request_id}-")]
        )
    processes = []
    for file in sorted(answers):
        for item in answers[file].get("processes") or []:
            try:
                processes.append(ProcessStacks.from_dict(item))
            except (KeyError, TypeError, ValueError):
                continue  # not an answer distrun wrote
    return processes, sorted(set(nodes) - _covered(answers))


def _covered(answers: dict[str, dict[str, Any]]) -> set[int]:
    return {rank for answer in answers.values() for rank in answer["node_ranks"] if isinstance(rank, int)}
