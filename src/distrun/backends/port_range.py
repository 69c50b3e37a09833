"""The TCP ports distrun hands to jobs (MASTER_PORT, TensorFlow task ports).

Below Linux's ephemeral range (32768-60999): ports handed to outgoing connections and to
bind(0) come from there, and one could take ours in the seconds between our check and the
framework's bind (TensorFlow servers bind only after importing TensorFlow).

A module of its own, importing nothing: the Slurm batch script asks a node for free ports
with `python -m distrun.agent.node --free-ports`, which must not pay for importing the local
backend (and with it pydantic and the agent) just to read this range.
"""

PORT_RANGE = (20000, 32767)
