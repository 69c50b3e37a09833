"""`type: ray` (Azure ML's experimental distribution): a Ray cluster over the job's nodes, the command once.

Azure ML does not document what it runs; distrun does this, on every compute:

- node 0 runs a Ray head (`ray start --head --block`), every other node a Ray worker node
  (`ray start --address <node 0>:<port> --block`, once the head's node is registered); each
  `ray start` runs under a small script of the job (`ray/start_node.py`) that retries a start
  Ray itself gave up on (a busy machine can make a raylet miss Ray's own start deadlines),
  shows the end of Ray's logs for each failed attempt and ends what that attempt left; each is an
  auxiliary process of the gang: it serves until the command is done, then distrun stops it
  (SIGTERM, grace, SIGKILL, and the launch-marker sweep for every Ray process it started), and
  one that dies first fails the job;
- node 0 also runs the driver: it waits until all the job's nodes have joined, then runs the
  command once with `RAY_ADDRESS` set; when it ends the job ends;
- with `address` set, no Ray process is started: the command runs once on node 0 with
  `RAY_ADDRESS=<address>` (an existing cluster).

Ports: `port` (the head's GCS port) and `dashboard_port` when given, else ports free on node 0;
also free ones for the Ray client server and, per node, the dashboard agent, so that several
simulated nodes on one machine never collide. `head_node_additional_args` and
`worker_node_additional_args` are appended to the `ray start` commands as written.
"""

from __future__ import annotations

import shlex

from distrun.plan.common import code_dir, job_env, rendered_command, shell_argv
from distrun.plan.model import Bindings, LaunchPlan, NodePlan, Placement, ProcessSpec
from distrun.plan.plan_job import PlanJob, RayOptions

# How long the driver waits for every node to join before the job fails (polled: a fast start
# is not slowed).
JOIN_TIMEOUT_S = 600
# How long a node keeps retrying a `ray start` that Ray itself gave up on. Ray's raylet waits a
# fixed 15 s for its dashboard agent (a Python process that imports every dashboard module,
# about 3 s of CPU) to report its port, and `ray start` a fixed 30 s for the raylet to
# register; neither can be configured, and a machine loaded many times over its cores misses
# them. Load comes and goes, so a node tries again until this budget is spent (at least twice);
# it stays under JOIN_TIMEOUT_S so that a node that never starts is reported by its own log.
START_BUDGET_S = 480
RAY_LOG = "std_log_node_{:02d}_ray.txt"
# Ray gives a starting node 60 s to register, and its raylet 30 s to see its agents' ports; a
# busy machine can need more (yours win if set).
RAY_NODE_DEFAULTS = {
    "RAY_raylet_start_wait_time_s": "120",
    "RAY_agent_register_timeout_ms": "300000",
    "RAY_worker_register_timeout_seconds": "120",
}
DRIVER_LOG = "std_log_process_00.txt"

# Written on every node (job-relative): waits until the cluster at RAY_ADDRESS has N live nodes.
# Workers run it with N = 1 before joining (the head's port answers before its node is
# registered, and a worker that comes too early fails); the driver with N = all nodes.
WAIT_SCRIPT_PATH = "ray/wait_for_nodes.py"
WAIT_SCRIPT = """\
import os, sys, time
import ray
address, want, timeout = os.environ["RAY_ADDRESS"], int(sys.argv[1]), float(sys.argv[2])
give_up = time.monotonic() + timeout
alive, problem = 0, ""
while time.monotonic() < give_up:
    try:
        if not ray.is_initialized():
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        alive = sum(1 for node in ray.nodes() if node.get("Alive"))
        if alive >= want:
            print(f"distrun: Ray cluster at {address}: {alive} nodes up", flush=True)
            sys.exit(0)
    except Exception as exc:
        problem = f" (last error: {exc})"
    time.sleep(0.5)
sys.exit(f"distrun: only {alive} of {want} Ray nodes up at {address} within {timeout:g} s{problem}")
"""

# Written on every node that starts Ray (job-relative): `python start_node.py BUDGET_S ray start
# ... --block`. Relays Ray's output; if `ray start` ends before Ray says it started, shows the
# end of the logs Ray wrote meanwhile, ends every process of that attempt (found by a marker in
# their environment) and tries again. Once started, it only relays: the node's end is the job's
# business (an auxiliary that dies fails the job). SIGTERM/SIGINT go to `ray start`, which stops
# its node. Standard library only: it runs with the node's Python, distrun or not.
START_SCRIPT_PATH = "ray/start_node.py"
START_SCRIPT = """\
import os, signal, subprocess, sys, tempfile, threading, time, uuid
budget, argv = float(sys.argv[1]), sys.argv[2:]
child, stopping = None, []
def forward(signum, frame):
    stopping.append(signum)
    if child is not None and child.poll() is None:
        child.send_signal(signum)
signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
def relay_lines(pipe, seen):
    for line in pipe:
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        if b"Ray runtime started" in line:
            seen.append(True)
def marked(marker):
    needle, found = f"DISTRUN_RAY_START={marker}".encode(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if needle in handle.read().split(b"\\0"):
                    found.append(int(pid))
        except OSError:
            pass
    return found
def agent_listen_port():
    port = ""
    for i, arg in enumerate(argv):
        if arg.startswith("--dashboard-agent-listen-port="):
            port = arg.split("=", 1)[1]
        elif arg == "--dashboard-agent-listen-port" and i + 1 < len(argv):
            port = argv[i + 1]
    return port if port.isdigit() and int(port) > 0 else ""
def announce_agent_port(marker, port, done):
    # The raylet waits a fixed 15 s for a file naming the port its dashboard agent listens on,
    # which the agent writes only once it has imported every dashboard module; a busy machine
    # makes it late and the raylet aborts its node. The port is fixed (given to `ray start`),
    # so the file can be written as soon as the raylet says where; the agent writes the same.
    needle = f"DISTRUN_RAY_START={marker}".encode()
    while not done.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    args = handle.read().decode(errors="replace").split("\\0")
                if not args[0].endswith("/raylet"):
                    continue
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    if needle not in handle.read().split(b"\\0"):
                        continue
            except OSError:
                continue
            flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
            node, session = flags.get("node_id", ""), flags.get("session_dir", "")
            if not node.isalnum() or not os.path.isdir(session):
                continue
            name = f"dashboard_agent_listen_port_{node}"
            hidden = os.path.join(session, f".{name}.{os.getpid()}")
            try:
                if not os.path.exists(os.path.join(session, name)):
                    with open(hidden, "x") as handle:
                        handle.write(port)
                    os.replace(hidden, os.path.join(session, name))  # read whole or not at all
            except OSError:
                pass
            return
        done.wait(0.25)
def log_tail(since):
    roots = [a.split("=", 1)[1] for a in argv if a.startswith("--temp-dir=")]
    logs = os.path.join(roots[0] if roots else os.path.join(tempfile.gettempdir(), "ray"), "session_latest", "logs")
    try:
        names = [os.path.join(logs, n) for n in os.listdir(logs) if n.endswith((".out", ".err", ".log"))]
    except OSError:
        return f"  (no Ray logs under {logs})"
    fresh = [p for p in names if os.path.getmtime(p) >= since and os.path.getsize(p)]
    # The raylet's and its agents' logs say why a node did not start; workers' logs only chatter.
    daemons = ("raylet", "gcs_server", "dashboard_agent", "runtime_env_agent")
    fresh.sort(key=lambda p: (os.path.basename(p).startswith(daemons), os.path.getmtime(p)))
    parts = []
    for path in fresh[-4:]:
        with open(path, "rb") as handle:
            lines = handle.read()[-20000:].decode(errors="replace").splitlines()
        causes = [line for line in lines if "Check failed" in line or "Timed out waiting" in line][-2:]
        parts.append(f"  --- {path}\\n" + "\\n".join("  " + line[:400] for line in causes + lines[-12:]))
    return "\\n".join(parts) or f"  (no Ray log under {logs} changed during the attempt)"
first, attempt = time.monotonic(), 0
while True:
    attempt += 1
    marker, begun, seen = uuid.uuid4().hex, time.time(), []
    env = dict(os.environ, DISTRUN_RAY_START=marker)
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    if stopping:  # a stop came while it was being created
        child.send_signal(stopping[0])
    relay = threading.Thread(target=relay_lines, args=(child.stdout, seen), daemon=True)
    relay.start()
    done = threading.Event()
    if agent_listen_port():
        threading.Thread(target=announce_agent_port, args=(marker, agent_listen_port(), done), daemon=True).start()
    code = child.wait()
    done.set()
    relay.join(2)  # the daemons Ray leaves may hold the pipe open: no waiting for its end
    started = bool(seen)
    if started or stopping:
        sys.exit(code)
    spent = time.monotonic() - first
    again = attempt < 2 or spent < budget
    then = "trying again" if again else "giving up"
    said = f"attempt {attempt}, {spent:.0f} s of {budget:g} s; {then}"
    print(f"distrun: ray start failed (exit code {code}), {said}. Ray's logs end:", flush=True)
    print(log_tail(begun - 1), flush=True)
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        for pid in marked(marker):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        give_up = time.monotonic() + wait
        while marked(marker) and time.monotonic() < give_up:
            time.sleep(0.2)
    if stopping:
        sys.exit(code)
    if not again:
        sys.exit(f"distrun: Ray did not start on this node in {attempt} attempts over {spent:.0f} s (see above)")
"""


def port_count(job: PlanJob) -> int:
    """Ports the backend finds free on node 0 for a Ray cluster (see `ray_ports`)."""
    dist = job.ray
    if dist.address:
        return 0
    return (
        (0 if dist.port else 1)
        + 1
        + (1 if dist.include_dashboard and not dist.dashboard_port else 0)
        + NODE_PORTS * job.node_count
    )


# Each node's agents get fixed ports: two simulated nodes on one machine must not share Ray's
# defaults, and a raylet gives up when dynamically chosen agent ports are slow to appear.
NODE_PORT_OPTIONS = (
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--runtime-env-agent-port",
)
NODE_PORTS = len(NODE_PORT_OPTIONS)


def node_ports(ports: list[int]) -> list[str]:
    return [f"{option}={port}" for option, port in zip(NODE_PORT_OPTIONS, ports, strict=True)]


def ray_ports(job: PlanJob, free: tuple[int, ...]) -> dict[str, object]:
    """The cluster's ports: GCS, client server, dashboard, one dashboard agent per node (from `free`, in that order)."""
    dist = job.ray
    pool = list(free)
    gcs = dist.port or pool.pop(0)
    client = pool.pop(0)
    dashboard = (dist.dashboard_port or pool.pop(0)) if dist.include_dashboard else None
    agents = [node_ports([pool.pop(0) for _ in range(NODE_PORTS)]) for _ in range(job.node_count)]
    return {"gcs": gcs, "client": client, "dashboard": dashboard, "agents": agents}


def start_with_retries(job_dir: str) -> list[str]:
    return ["python", f"{job_dir.rstrip('/')}/{START_SCRIPT_PATH}", str(START_BUDGET_S)]


def head_argv(address: str, ports: dict[str, object], dist: RayOptions, job_dir: str) -> str:
    args = [
        *start_with_retries(job_dir),
        "ray",
        "start",
        "--head",
        "--block",
        f"--node-ip-address={address}",
        f"--port={ports['gcs']}",
        f"--ray-client-server-port={ports['client']}",
        *ports["agents"][0],  # type: ignore[index]
    ]
    if ports["dashboard"]:
        args += ["--include-dashboard=true", "--dashboard-host=0.0.0.0", f"--dashboard-port={ports['dashboard']}"]
    else:
        args.append("--include-dashboard=false")
    return shlex.join(args) + (f" {dist.head_node_additional_args}" if dist.head_node_additional_args else "")


def wait_for(nodes: int, job_dir: str) -> str:
    return shlex.join(["python", f"{job_dir.rstrip('/')}/{WAIT_SCRIPT_PATH}", str(nodes), str(JOIN_TIMEOUT_S)])


def worker_argv(head: str, address: str, agent_ports: list[str], dist: RayOptions, job_dir: str) -> str:
    args = [
        *start_with_retries(job_dir),
        "ray",
        "start",
        "--block",
        f"--address={head}",
        f"--node-ip-address={address}",
        *agent_ports,
    ]
    extra = f" {dist.worker_node_additional_args}" if dist.worker_node_additional_args else ""
    return f"{wait_for(1, job_dir)} || exit 1\nexec {shlex.join(args)}{extra}"


def driver_command(command: str, nodes: int, job_dir: str) -> str:
    return f"{wait_for(nodes, job_dir)} || exit 1\n{command}"


def plan_ray(job: PlanJob, placement: Placement, bindings: Bindings) -> LaunchPlan:
    dist = job.ray
    command = rendered_command(job, bindings)
    cwd = code_dir(placement)
    base = job_env(job, placement, bindings)
    node_count = len(placement.hosts)
    if dist.address:
        head = dist.address
        ports: dict[str, object] = {}
    else:
        ports = ray_ports(job, placement.task_ports)
        head = f"{placement.master_addr}:{ports['gcs']}"
    base["RAY_ADDRESS"] = head

    def process(name: str, role: str, node: int, argv: tuple[str, ...], log: str, auxiliary: bool) -> ProcessSpec:
        env = dict(base, NODE_RANK=str(node), AZUREML_CR_NODE_RANK=str(node), AZUREML_PROCESS_NAME=name)
        label = "driver" if role == "driver" else f"{node}/ray"
        return ProcessSpec(
            name=name,
            role=role,
            index=node if role != "driver" else 0,
            node_rank=node,
            local_rank=0,
            rank=0 if role == "driver" else None,
            argv=argv,
            env=env,
            env_defaults={} if role == "driver" else dict(RAY_NODE_DEFAULTS),
            cwd=cwd,
            log_name=log,
            label=label,
            auxiliary=auxiliary,
        )

    nodes = []
    for node, host in enumerate(placement.hosts):
        procs = []
        if not dist.address:
            if node == 0:
                start = head_argv(host, ports, dist, placement.job_dir)
            else:
                start = worker_argv(head, host, ports["agents"][node], dist, placement.job_dir)  # type: ignore[index]
            procs.append(process(f"ray_node_{node}", "ray", node, shell_argv(start), RAY_LOG.format(node), True))
        if node == 0:
            run = command if dist.address else driver_command(command, node_count, placement.job_dir)
            procs.insert(0, process("driver", "driver", 0, shell_argv(run), DRIVER_LOG, False))
        files = {WAIT_SCRIPT_PATH: WAIT_SCRIPT, START_SCRIPT_PATH: START_SCRIPT} if procs and not dist.address else {}
        nodes.append(NodePlan(node_rank=node, host=host, processes=tuple(procs), files=files))
    notes = [f"type: ray: the command runs once on node 0 with RAY_ADDRESS={head}"]
    if not dist.address:
        notes.append(
            f"distrun starts a Ray head on node 0 and a Ray worker node on each other node, waits until all "
            f"{node_count} joined, and stops them when the command ends"
        )
    return LaunchPlan(
        job_name=placement.run_id,
        distribution="ray",
        command=command,
        world_size=1,
        master_addr=placement.master_addr,
        master_port=placement.master_port,
        nodes=tuple(nodes),
        notes=tuple(notes),
    )
