"""An optional resident process that keeps distrun loaded and runs `distrun run` for its user.

A cold `distrun run` spends most of its fixed cost loading Python libraries (pydantic,
ruamel.yaml, click) and distrun's own modules before the first rank starts. A resident process,
started once with `distrun resident start`, pays that once: each `distrun run` then connects to
it, and it forks a copy of itself that runs the command exactly as the cold command would, with
the caller's arguments, environment, working folder, umask and standard streams. Whatever else
of the caller's context the copy would not share (user, groups, namespaces, cgroup, resource
limits, CPU affinity, capabilities, scheduling niceness) must already be the same, or the
command runs cold. `wire` is what both sides send, `client` the command's side, `server` the
resident's, `context` the comparison of the two processes.
"""
