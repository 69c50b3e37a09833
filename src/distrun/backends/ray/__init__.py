"""The Ray backend: a job becomes one placement group; distrun's node agent runs each node in an actor.

distrun does not replace Ray's scheduler: it asks Ray for one STRICT_SPREAD placement group
with one bundle per node of the job (`placement`, pure), waits `placement_timeout` seconds for
it, and runs one `RayNodeAgent` actor per bundle (`actor`), which starts the same engine-free
node agent local and Slurm jobs use (`node_agent`). The `distrun` process that submitted the
job drives it (`driver`): it streams every rank's log back into the job folder on its own
machine (no shared filesystem), stops every node when one fails, and writes the record.

Modules: `backend` (the `Backend` contract: `BACKEND`; `execute` drives a job), `target` (the
compute target's settings), `placement` (the request, and the error when it cannot be placed),
`actor`, `node_agent`, `driver`, `launcher` (`distrun job create`'s background driver).

This package's own import is light on purpose: every node's actor and node agent import it
before any rank starts, and the backend (pydantic's job models among its imports) took 0.17 s
of that.
"""
