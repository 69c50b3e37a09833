"""A pipeline as a graph of steps: the order they can run in, and the cycle when there is none.

Pure functions over step names; the steps themselves are `distrun.spec.loaded_pipeline.PipelineStep`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def find_cycle(depends_on: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle among the steps, as the steps in it with the first one repeated at the end
    (`[a, b, a]`), or None. Steps are tried in the mapping's order, so the cycle named is
    the one met first in the file."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(step: str) -> list[str] | None:
        state[step] = 1
        path.append(step)
        for upstream in depends_on.get(step, ()):
            if upstream not in depends_on:
                continue  # an undefined step: reported on its own
            if state.get(upstream) == 1:
                return [*path[path.index(upstream) :], upstream]
            if upstream not in state:
                found = visit(upstream)
                if found:
                    return found
        path.pop()
        state[step] = 2
        return None

    for step in depends_on:
        if step not in state:
            found = visit(step)
            if found:
                return found
    return None


def run_order(depends_on: Mapping[str, Sequence[str]]) -> list[str]:
    """The steps in an order where each comes after every step it reads from; among steps that
    are ready together, file order. The graph has no cycle (`find_cycle` said so)."""
    placed: set[str] = set()
    order: list[str] = []
    while len(order) < len(depends_on):
        ready = [s for s in depends_on if s not in placed and all(u in placed for u in depends_on[s])]
        if not ready:
            raise ValueError("the steps form a cycle")
        for step in ready:
            placed.add(step)
            order.append(step)
    return order


def levels(depends_on: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Each step's depth: 0 for steps that read from no step, else one more than the deepest
    step it reads from (steps of one level can run at the same time)."""
    depth: dict[str, int] = {}
    for step in run_order(depends_on):
        depth[step] = 1 + max((depth[u] for u in depends_on[step]), default=-1)
    return depth


def downstream_of(step: str, depends_on: Mapping[str, Sequence[str]]) -> set[str]:
    """Every step that reads, directly or through others, from `step` (what its failure stops)."""
    found: set[str] = set()
    frontier = [step]
    while frontier:
        current = frontier.pop()
        for other, upstream in depends_on.items():
            if current in upstream and other not in found:
                found.add(other)
                frontier.append(other)
    return found
