"""The Slurm backend: a job becomes one sbatch script; Slurm places it, distrun's node agent runs it.

distrun does not replace Slurm. It renders a batch script (a pure function of the job and the
compute target, printed by `distrun plan`), submits that very script with `sbatch --parsable`,
and reads the job's state back from `scontrol` (no accounting needed). Inside the allocation,
`srun --ntasks-per-node=1 --kill-on-bad-exit=1` starts one node agent per node
(`python -m distrun.backends.slurm.node_agent`): it turns SLURM_* into the node's facts and runs
the engine-free node agent, which writes the node's outcome into the job folder. That folder lives
under DISTRUN_HOME, which every node must see.

Modules: `backend` (the `Backend` contract: `BACKEND`), `node_agent` (the entry point on each
node), `target` (the compute target's settings), `script` (the batch script, pure), `client`
(the Slurm commands), `state` (Slurm's state and the nodes' outcomes -> `JobStatus`, pure),
`layout` (the job's Slurm files), `mpi` (an MPI job's plan inside the allocation: node 0's
mpirun starts the other nodes' ranks through Slurm, pure).

This package's own import is light on purpose: the node agent's start delays every rank.
"""
