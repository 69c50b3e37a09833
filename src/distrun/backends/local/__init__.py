"""The local backend: the job's nodes simulated on this machine, one gang supervised by distrun here.

Modules: `backend` (the `Backend` contract: `BACKEND`; `execute` supervises a job to its end),
`launcher` (`distrun job create`'s background supervisor), `preflight` (what this machine must
have before a job is recorded).

This package's own import is light on purpose, like the other engines': a background
supervisor imports it before its job starts.
"""
