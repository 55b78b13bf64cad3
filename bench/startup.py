"""Broker start-up time (issue 31, suite time): import time and time from process start to a ready listener.

    .venv/bin/python bench/startup.py                                  # this checkout, 5 runs
    .venv/bin/python bench/startup.py --runs 7 --compare /tmp/base     # A/B against another tree, same run

Per run and source tree (``--compare`` adds trees; the runs alternate between the trees, so each sees the same
machine load):

- ``import``: the wall time, inside a fresh interpreter, of importing what ``kafka-server-start`` imports before
  the broker starts (``pykbroker.kafka``, the logging setup, ``KafkaConfig``, ``KafkaRaftServer`` and the servers
  of a combined node's two roles, ``BrokerServer`` and ``ControllerServer``);
- ``tool``: the wall time of ``python -m pykbroker.tools.topic_command --help`` (a tool's fast path; the tools
  have no ``--version``), process start to exit;
- ``format``: the wall time of ``python -m pykbroker.tools.storage_tool format --standalone`` (process start to
  exit) on a fresh data directory;
- ``api``: from the ``python -m pykbroker.kafka`` process start to the first successful ApiVersions v3 answer on
  the PLAINTEXT listener (polled every 5 ms);
- ``meta``: ... to the first Metadata v12 answer listing the broker (it has registered and published).

Each figure is printed as wall/CPU milliseconds: the CPU time (user + system) of the process measured (the
interpreter's own for ``import``, the tool's for ``tool``/``format``, the broker's, all threads, at that moment
for ``api``/``meta``; 10 ms resolution there) depends much less on the machine's load than the wall time.

Each tree is imported once before the runs (a warm-up that writes the bytecode cache, as an installed package
has one). The broker is a lone combined node (``process.roles=broker,controller``) on ``--port`` / ``--port``+1 with its
data in a temporary directory; it is stopped with SIGTERM after each run. Medians are printed at the end with the
load average (``/proc/loadavg``) at the start and the end: the machine may be shared, so compare within one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pykbroker.protocol import decode_response, encode_request
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import response_header_version

HERE = Path(__file__).resolve().parents[1]
IMPORT_SNIPPET = (  # argv[0] as the kafka-server-start console script has it (pykbroker.utils.logging looks)
    "import sys, time; sys.argv[0] = 'kafka-server-start'; t0 = time.perf_counter()\n"
    "import pykbroker.kafka\n"
    "from pykbroker.utils import logging as plog\n"
    "from pykbroker.config.kafka_config import KafkaConfig\n"
    "from pykbroker.server.kafka_raft_server import KafkaRaftServer\n"
    "import pykbroker.server.broker_server, pykbroker.server.controller_server\n"  # a combined node's two roles
    "print(time.perf_counter() - t0, time.process_time())\n"
)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def env_for(tree: Path) -> dict[str, str]:  # run with cwd=tree: `-c` and `-m` put the working directory first
    """The subprocesses' environment: ``tree`` on the path and a bytecode cache (as an installed package has),
    outside the tree when the environment forbids writing ``__pycache__`` (the tests' conftest does the same)."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), f"pykbroker-pycache-{os.getuid()}"))
    return env


def children_cpu() -> float:
    """CPU seconds (user + system) of the waited-for child processes so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) of the running process ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def timed_run(cmd: list[str], tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of running ``cmd`` to its exit."""
    t0, c0 = time.perf_counter(), children_cpu()
    subprocess.run(cmd, cwd=tree, env=env_for(tree), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, children_cpu() - c0


def import_time(tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of the broker's imports, measured inside the interpreter (its start not included)."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_SNIPPET], cwd=tree, env=env_for(tree), check=True, capture_output=True, text=True
    )
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def request(port: int, api: ApiKeys, version: int, body: dict, timeout: float = 1.0) -> dict | None:
    """One request on a fresh connection; None when the broker does not accept or answer (yet)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(encode_request(api, version, 1, "startup-bench", body))
            buf = b""
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                buf += chunk
            skip = 4 if response_header_version(api, version) == 0 else 5  # correlation id (+ empty tag buffer)
            return decode_response(api, version, memoryview(buf)[4 + skip :])
    except OSError:
        return None


def write_config(data: Path, port: int) -> Path:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{port + 1}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data / "logs"),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    }
    path = data / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def one_run(tree: Path, port: int, timeout: float) -> dict[str, tuple[float, float]]:
    """Figure -> (wall, CPU) seconds; CPU of ``api``/``meta`` is the broker's own at that moment."""
    result = {"import": import_time(tree)}
    result["tool"] = timed_run([sys.executable, "-m", "pykbroker.tools.topic_command", "--help"], tree)
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        data = Path(tmp)
        config = write_config(data, port)
        fmt = [sys.executable, "-m", "pykbroker.tools.storage_tool", "format", "-t", CLUSTER_ID, "-c", str(config)]
        result["format"] = timed_run([*fmt, "--standalone"], tree)
        env = dict(env_for(tree), LOG_DIR=str(data / "server-logs"))
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pykbroker.kafka", str(config)],
            cwd=tmp,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + timeout
            api_body = {"client_software_name": "startup-bench", "client_software_version": "1"}
            while request(port, ApiKeys.API_VERSIONS, 3, api_body) is None:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"no ApiVersions answer from {tree} (exit={proc.poll()})")
                time.sleep(0.005)
            result["api"] = time.perf_counter() - t0, proc_cpu(proc.pid)
            meta_body = {"topics": None, "allow_auto_topic_creation": False}
            while True:
                r = request(port, ApiKeys.METADATA, 12, meta_body)
                if r is not None and any(b["node_id"] == 1 for b in r["brokers"]):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"no Metadata showing the broker from {tree} (exit={proc.poll()})")
                time.sleep(0.005)
            result["meta"] = time.perf_counter() - t0, proc_cpu(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--port", type=int, default=19392, help="PLAINTEXT port; the controller listens on port+1")
    ap.add_argument("--compare", action="append", type=Path, default=[], help="another source tree (repeatable)")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    trees = [HERE, *(p.resolve() for p in args.compare)]
    load_start = loadavg()
    print(f"{args.runs} runs per tree, {os.cpu_count()} cores, load {load_start}", flush=True)
    results: dict[Path, list[dict[str, tuple[float, float]]]] = {t: [] for t in trees}
    for tree in trees:  # warm-up: the bytecode cache is written, the files are in the page cache
        import_time(tree)
        timed_run([sys.executable, "-m", "pykbroker.tools.topic_command", "--help"], tree)
        timed_run([sys.executable, "-m", "pykbroker.tools.storage_tool", "random-uuid"], tree)
    for i in range(args.runs):
        for tree in trees:
            r = one_run(tree, args.port, args.timeout)
            results[tree].append(r)
            figures = ", ".join(f"{k} {w * 1000:.0f}/{c * 1000:.0f}" for k, (w, c) in r.items())
            print(f"run {i + 1} {tree} (wall/CPU ms): {figures}", flush=True)
    print(f"medians, wall/CPU ms, load {load_start} -> {loadavg()}:")
    for tree, runs in results.items():
        wall = {k: statistics.median(r[k][0] for r in runs) for k in runs[0]}
        cpu = {k: statistics.median(r[k][1] for r in runs) for k in runs[0]}
        print(f"  {tree}: " + ", ".join(f"{k} {wall[k] * 1000:.0f}/{cpu[k] * 1000:.0f}" for k in wall))


if __name__ == "__main__":
    main()
