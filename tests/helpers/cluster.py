"""A KRaft cluster of real processes on 127.0.0.1: controller-only and broker-only nodes.

``KRaftCluster(root, controllers=3, brokers=2)`` gives each controller a port of its own (the voters must
know each other's address before any starts). Brokers listen on ephemeral ports. Every node is formatted
with ``kafka-storage format -t <one cluster id> -c <its server.properties>``, as an operator does, and
is then started with ``python -m pykbroker.kafka`` (tests.helpers.broker.BrokerProcess). Timeouts are set
short by config so elections and fencing take about a second. ``format_args`` are added to every format
(e.g. ``("--feature", "transaction.version=1")``). Node ids: controllers 1..n, brokers
from 101. ``combined=True`` makes the controllers combined nodes (``process.roles=broker,controller``,
a PLAINTEXT listener beside the controller one): each is then in ``brokers`` too, under its controller
id. Only processes this object started are ever signalled.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.meta_properties import random_uuid
from tests.helpers.broker import ROOT, BrokerProcess

QUORUM_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "600",
    "controller.quorum.fetch.timeout.ms": "1200",
    "controller.quorum.election.backoff.max.ms": "400",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "3000",
    # no preferred-leader rebalance behind a test's back (Kafka's default is every 300 s)
    "leader.imbalance.check.interval.seconds": "3600",
    "initial.broker.registration.timeout.ms": "30000",
    "num.network.threads": "1",
    "num.io.threads": "2",
    "background.threads": "2",
}


def _pycache_env() -> dict[str, str]:
    """The bytecode cache location the tests chose (tests/conftest.py), for subprocesses with a bare env."""
    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    return {"PYTHONPYCACHEPREFIX": prefix} if prefix else {}


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class KRaftCluster:
    def __init__(
        self,
        root: Path,
        controllers: int = 3,
        brokers: int = 2,
        combined: bool = False,
        format_args: tuple[str, ...] = (),
        **overrides: str,
    ):
        self.root = Path(root)
        self.format_args = format_args
        self.tree = ROOT
        self.cluster_id = random_uuid()
        self.controller_ports = dict(zip(range(1, controllers + 1), free_ports(controllers), strict=True))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        common = {
            **QUORUM_TIMEOUTS,
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            **{k.replace("_", "."): str(v) for k, v in overrides.items()},
        }
        self.controllers: dict[int, BrokerProcess] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        for i, port in self.controller_ports.items():
            roles, listeners = "controller", f"CONTROLLER://127.0.0.1:{port}"
            if combined:
                roles, listeners = "broker,controller", f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"
            self.controllers[i] = BrokerProcess(
                self.root / f"controller-{i}",
                **{**common, "process.roles": roles, "node.id": str(i)},
                listeners=listeners,
            )
            if combined:
                self.brokers[i] = self.controllers[i]
        for j in range(brokers):
            node = 101 + j
            self.brokers[node] = BrokerProcess(
                self.root / f"broker-{node}",
                **{**common, "process.roles": "broker", "node.id": str(node)},
                listeners="PLAINTEXT://127.0.0.1:0",
            )

    def use_tree(self, tree: Path) -> KRaftCluster:
        """Format and run every node from the source tree ``tree`` instead of this checkout (benchmarks compare
        a baseline tree with this one); call before :meth:`start`."""
        self.tree = Path(tree)
        for node in self.nodes:
            node.tree = self.tree
        return self

    @property
    def nodes(self) -> list[BrokerProcess]:
        return list({id(n): n for n in [*self.controllers.values(), *self.brokers.values()]}.values())

    def format(self, node: BrokerProcess, cluster_id: str | None = None) -> None:
        node.write_config()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pykbroker.tools.storage_tool",
                "format",
                "-t",
                cluster_id or self.cluster_id,
                "-c",
                str(node.config_path),
                *self.format_args,
            ],
            check=True,
            capture_output=True,
            cwd=str(self.tree),
            env={"PYTHONPATH": str(self.tree), "PATH": "/usr/bin:/bin", **_pycache_env()},
            timeout=60,
        )

    def start(self, timeout: float = 60.0) -> KRaftCluster:
        """Format every node and start them all at once (controllers need a majority to elect); the nodes are
        formatted side by side (each format is a ``kafka-storage`` process of its own)."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for f in [pool.submit(self.format, n) for n in self.nodes]:
                f.result()
        self.start_nodes(self.nodes, timeout)
        return self

    @staticmethod
    def start_nodes(nodes: list[BrokerProcess], timeout: float = 60.0) -> None:
        with ThreadPoolExecutor(len(nodes)) as pool:
            for f in [pool.submit(n.start, timeout) for n in nodes]:
                f.result()

    def stop(self) -> None:
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(
                pool.map(lambda n: n.stop(30), [b for b in self.brokers.values() if b not in self.controllers.values()])
            )
            list(pool.map(lambda n: n.stop(30), self.controllers.values()))

    def kill_all(self) -> None:
        for node in self.nodes:
            node.kill()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc and b.proc.poll() is None)

    @property
    def voters_csv(self) -> str:
        """Every controller's host:port, comma-separated (``--bootstrap-controller``)."""
        return ",".join(self.controller_address(i) for i in self.controller_ports)

    def controller_address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.controller_ports[node_id]}"

    def describe_quorum(self, via: str) -> dict:
        """DescribeQuorum v2 of ``__cluster_metadata-0`` sent to ``via`` (host:port); the partition dict."""
        with BrokerConnection.to(via) as c:
            r = c.request(
                ApiKeys.DESCRIBE_QUORUM,
                2,
                {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
            )
        if not r["topics"]:  # a top-level error
            return {"error_code": r["error_code"], "leader_id": -1, "leader_epoch": -1}
        return r["topics"][0]["partitions"][0]

    def leader_and_epoch(self) -> tuple[int, int]:
        """(active controller, epoch) as the first live controller that knows a leader reports it
        (DescribeQuorum); (-1, -1) when none does."""
        for i, node in self.controllers.items():
            if node.proc is None or node.proc.poll() is not None:
                continue
            try:
                p = self.describe_quorum(self.controller_address(i))
            except OSError:
                continue
            if p["error_code"] == 0 and p["leader_id"] >= 0:
                return p["leader_id"], p["leader_epoch"]
        return -1, -1

    def leader_id(self) -> int:
        """The active controller as the live controllers see it, or -1."""
        return self.leader_and_epoch()[0]

    def await_leader(self, timeout: float = 15.0, not_: int | None = None) -> int:
        """Wait (bounded) until the live controllers report an active controller (other than ``not_``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader_id()
            if leader >= 0 and leader != not_:
                return leader
            time.sleep(0.05)
        raise AssertionError(f"no active controller within {timeout}s")
