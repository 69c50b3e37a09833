"""The Kubernetes backend: a job becomes a JobSet (or Indexed Jobs and a headless Service).

distrun does not replace Kubernetes' controllers: it renders the objects purely from the plan
(`render`: `distrun plan --compute <kubernetes target> --output yaml` prints them), creates
them with the official `kubernetes` client, and reads pods, their logs and their agents'
outcomes back. In every pod, distrun's node agent (`pod_agent`) runs that pod's processes
with the same gang supervisor as local compute. Nothing needs a shared filesystem: the job's
files travel in a ConfigMap, the outcomes in the pods' termination messages and logs.

Modules: `target` (settings), `pods` (roles, pod names, placement: pure), `manifests` (the
objects: pure), `bundle` (the job's files as one ConfigMap), `render` (all of it for one job),
`display` (the objects as `distrun plan` prints them), `client` (the API), `cluster` (the
operations on one target's cluster: check, create, observe, stop, delete), `state` (pods ->
distrun's status: pure), `attempts` (JobSet's restarts: pure), `observe` (one look at a job),
`collect` (logs and outcomes into the job folder), `job_files` (the job folder's k8s/ files),
`pod_agent` (runs in each pod), `backend` (the backend, `KubernetesBackend`: the contract of
`distrun.backends.base`).

This package's own import is light on purpose: every pod's agent imports it before its ranks
start, and the backend (its API client, the job record, submission) added about 0.02 s there.
"""
