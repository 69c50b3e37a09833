"""Job-wide "the main work is done", for node agents that each see only their own node.

Auxiliary processes (TensorFlow parameter servers, and the workers under a chief) serve until
distrun stops them, once every non-auxiliary process of the *job* has completed. One agent
running every node knows that by itself; an agent per node learns it from its peers: each sets
a marker on the job's `OutcomeChannel` (`ChannelPeers`) when its own main processes have all
completed, and stops its auxiliaries once all nodes have set theirs.
"""

from __future__ import annotations

from typing import Protocol

# How often an agent waiting only for its peers looks at their markers.
POLL_SECONDS = 0.25


class MainWorkPeers(Protocol):
    def mark_done(self) -> None: ...

    def all_done(self) -> bool: ...
