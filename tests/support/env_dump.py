"""Processes that print the environment they were given, for tests of how an engine wires a job.

A framework reads its wiring from the environment (RANK, MASTER_ADDR, TF_CONFIG, OMPI_*, ...).
Where the framework itself already runs end to end elsewhere, a test only needs to know that
each process got exactly the right values: a few lines of plain Python print them, in a
fraction of the time a framework import takes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

MARK = "ENV "


def show_env(keys: Sequence[str]) -> str:
    """show_env.py: prints `ENV {key: value}` for `keys` (None for an unset key), in one write,
    so that lines of processes sharing one pipe (the ranks under torchrun) never interleave."""
    return (
        "import json, os\n"
        f"shown = {{key: os.environ.get(key) for key in {list(keys)!r}}}\n"
        f"os.write(1, ({MARK!r} + json.dumps(shown) + '\\n').encode())\n"
    )


def shown_envs(text: str) -> list[dict[str, str | None]]:
    """Every environment a show_env.py printed into `text` (a log), in order."""
    return [json.loads(line[len(MARK) :]) for line in text.splitlines() if line.startswith(MARK)]


def shown_env(text: str) -> dict[str, str | None]:
    """The one environment a show_env.py printed into `text`."""
    (env,) = shown_envs(text)
    return env


# tf_task.py ROLE: a TensorFlow task without TensorFlow. It does what TensorFlow does with
# TF_CONFIG, minus the training: it serves on its own address (so that address must be free on
# its node), and every task of role ROLE (the chief, or the workers without one) connects to
# every other task's address and notes which task answered there. Tasks of ROLE end once
# they heard every other task and every other task of ROLE heard them; the others serve on
# until distrun stops them, as TensorFlow's servers do.
TF_TASK = """
import json, os, socket, sys, threading, time

trainer_role = sys.argv[1]
config = json.loads(os.environ["TF_CONFIG"])
me = config["task"]
name = f"{me['type']} {me['index']}"
mine = config["cluster"][me["type"]][me["index"]]
host, port = mine.rsplit(":", 1)
server = socket.create_server((host, int(port)))
print(f"{name} serving at {mine}", flush=True)

trainers = len(config["cluster"].get(trainer_role, []))
greeted = []


def serve():
    while True:
        conn, _ = server.accept()
        with conn:
            conn.sendall(name.encode())
            greeted.append(conn.recv(64).decode())


threading.Thread(target=serve, daemon=True).start()
if me["type"] == trainer_role:
    others = [a for addresses in config["cluster"].values() for a in addresses if a != mine]
    for address in others:
        peer_host, peer_port = address.rsplit(":", 1)
        give_up = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection((peer_host, int(peer_port)), timeout=10) as conn:
                    heard = conn.recv(64).decode()
                    conn.sendall(name.encode())
                break
            except OSError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.05)
        print(f"{name}: {address} is {heard}", flush=True)
    while len(greeted) < trainers - 1:
        time.sleep(0.05)
    print(f"{name}: done", flush=True)
else:
    time.sleep(3600)
"""


def tf_task(keys: Sequence[str]) -> str:
    """tf_task.py (see TF_TASK), which also prints `ENV {key: value}` for `keys` as it starts."""
    return show_env(keys) + TF_TASK
