"""Dynamic controller quorum (KIP-853) with real processes: grow a standalone controller to three, then remove it.

Controller 1 is formatted ``--standalone`` (the bootstrap snapshot holds the voter set {1}), a broker and
controllers 2 and 3 (``--no-initial-controllers``) find the quorum through ``controller.quorum.bootstrap.servers``
only. ``kafka-features describe`` shows ``kraft.version`` 1. Under a light produce load, ``kafka-metadata-quorum
add-controller`` adds 2 (``--bootstrap-controller``) and 3 (``--bootstrap-server``: the broker forwards AddRaftVoter
to the active controller) at the same time (one is retried until the other is committed), and
``remove-controller --bootstrap-server`` removes 1 (the leader, which resigns once its removal is committed).
DescribeQuorum shows each change (voters with their directory ids and endpoints), the quorum keeps committing
(topics created before, between and after the changes are all visible) and the producer keeps being acknowledged.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.properties import load_properties
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.meta_properties import uuid_from_string
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import QUORUM_TIMEOUTS, KRaftCluster, free_ports
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


class Load(threading.Thread):
    """A producer acknowledging one small record every ~50 ms (acks=all); counts acks and errors."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.acked = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def _delivered(self, err, _msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(str(err))

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            self.producer.produce("load", f"v{i}".encode(), on_delivery=self._delivered)
            self.producer.poll(0.05)
            i += 1
        self.producer.flush(10)


def tool(module: str, *args: str) -> tuple[int, str]:
    """``pykbroker.tools.<module>.main(args)`` in this process: (exit code, stdout). The same code as the command,
    without a Python start-up per call (the test runs six of them on a machine with few cores); errors go to
    stderr as from the command. The storage tool prints to ``sys.stdout``: it runs from the main thread only."""
    main = importlib.import_module(f"pykbroker.tools.{module}").main
    out = io.StringIO()
    if module == "storage_tool":
        with contextlib.redirect_stdout(out):
            return main(list(args)), out.getvalue()
    return main(list(args), out=out), out.getvalue()


def voters(cluster: KRaftCluster, via: str) -> dict[int, str]:
    """{voter id: directory id (Kafka Uuid string)} of DescribeQuorum at ``via``; {} when it does not lead."""
    from pykbroker.tools.metadata_quorum_command import kafka_uuid

    q = cluster.describe_quorum(via)
    if q["error_code"] != 0:
        return {}
    return {v["replica_id"]: kafka_uuid(v["replica_directory_id"]) for v in q["current_voters"]}


def test_grow_a_standalone_controller_to_three_and_remove_it(tmp_path):
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    bootstrap_servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    common = {
        **QUORUM_TIMEOUTS,
        "controller.quorum.voters": "",
        "controller.quorum.bootstrap.servers": bootstrap_servers,
        "controller.listener.names": "CONTROLLER",
    }
    cluster = KRaftCluster(tmp_path, controllers=0, brokers=0)
    for i, port in ports.items():
        cluster.controllers[i] = BrokerProcess(
            tmp_path / f"controller-{i}",
            **{**common, "process.roles": "controller", "node.id": str(i)},
            listeners=f"CONTROLLER://127.0.0.1:{port}",
        )
    cluster.controller_ports = ports
    cluster.brokers[101] = broker = BrokerProcess(
        tmp_path / "broker-101",
        **{**common, "process.roles": "broker", "node.id": "101"},
        listeners="PLAINTEXT://127.0.0.1:0",
    )
    c1, c2, c3 = (cluster.controllers[i] for i in (1, 2, 3))
    load = None
    pool = ThreadPoolExecutor(4)
    try:
        # format the four nodes at once: 1 --standalone, the broker, 2 and 3 --no-initial-controllers
        formats = {
            c1: ("--standalone",),
            broker: (),
            c2: ("--no-initial-controllers",),
            c3: ("--no-initial-controllers",),
        }
        for node, args in formats.items():
            node.write_config()
            code, out = tool("storage_tool", "format", "-t", cluster.cluster_id, "-c", str(node.config_path), *args)
            assert code == 0, out
        dir_ids = {
            i: load_properties(str(tmp_path / f"controller-{i}" / "logs" / "meta.properties"))["directory.id"]
            for i in ports
        }
        KRaftCluster.start_nodes([c1, broker, c2, c3])  # 2 and 3 start as observers of 1
        addr = cluster.controller_address
        assert voters(cluster, addr(1)) == {1: dir_ids[1]}
        # kraft.version is the Raft log's KRaftVersionRecord: 1 in a dynamic quorum, on the broker and the controller
        describes = [
            pool.submit(tool, "feature_command", option, address, "describe")
            for option, address in (("--bootstrap-server", cluster.bootstrap), ("--bootstrap-controller", addr(1)))
        ]
        create_topic(cluster.bootstrap, "before", partitions=1)
        create_topic(cluster.bootstrap, "load", partitions=1)
        load = Load(cluster.bootstrap)
        load.start()

        # add 2 through the controller and 3 through the broker (forwarded to the active controller) at the same
        # time: one change at a time, the other is retried by the tool on REQUEST_TIMED_OUT
        def add(new: int, option: str, address: str):
            config = str(cluster.controllers[new].config_path)
            return tool("metadata_quorum_command", option, address, "--command-config", config, "add-controller")

        adds = {
            2: pool.submit(add, 2, "--bootstrap-controller", addr(1)),
            3: pool.submit(add, 3, "--bootstrap-server", cluster.bootstrap),
        }
        for describe in describes:
            code, out = describe.result()
            assert code == 0 and (
                "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t"
                in out
            ), out
        for new, future in adds.items():
            code, out = future.result()
            assert code == 0, out
            assert out.strip() == (
                f"Added controller {new} with directory id {dir_ids[new]} and endpoints: "
                f"CONTROLLER://127.0.0.1:{ports[new]}"
            )
        assert voters(cluster, addr(1)) == dir_ids
        status = pool.submit(tool, "metadata_quorum_command", "--bootstrap-controller", addr(1), "describe", "--status")
        create_topic(cluster.bootstrap, "between", partitions=1)
        code, nodes = status.result()
        assert code == 0, nodes
        for i, port in ports.items():
            assert f'"id": {i}, "directoryId": "{dir_ids[i]}", "endpoints": ["CONTROLLER://127.0.0.1:{port}"]' in (
                nodes
            ), nodes
        acked = load.acked

        # remove 1, the leader, through the broker: it resigns once its removal is committed
        code, out = tool(
            "metadata_quorum_command", "--bootstrap-server", cluster.bootstrap,
            "remove-controller", "--controller-id", "1", "--controller-directory-id", dir_ids[1],
        )  # fmt: skip
        assert (code, out.strip()) == (0, f"Removed  KRaft controller 1 with directory id {dir_ids[1]}")

        def removed() -> bool:
            leader = cluster.leader_id()
            return leader in (2, 3) and voters(cluster, addr(leader)) == {2: dir_ids[2], 3: dir_ids[3]}

        wait_until(removed, 20, message="controller 1 removed and a new leader among 2, 3")
        c1.kill()  # the quorum {2, 3} goes on without it
        create_topic(cluster.bootstrap, "after", partitions=1)
        from confluent_kafka.admin import AdminClient

        topics = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).topics
        assert {"before", "between", "after", "load"} <= set(topics)
        wait_until(lambda: load.acked > acked + 20, 20, message="the producer acknowledged after the removal")
        assert uuid_from_string(dir_ids[2]) and not load.errors, load.errors[:5]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if load is not None:
            load.stopping.set()
            load.join(20)
        cluster.kill_all()


def endpoints(cluster: KRaftCluster, via: str) -> dict[int, list[tuple[str, str, int]]]:
    """{voter id: [(listener, host, port)]} of DescribeQuorum v2 ``nodes`` at ``via``; {} when it does not lead."""
    with BrokerConnection.to(via) as conn:
        r = conn.request(
            ApiKeys.DESCRIBE_QUORUM,
            2,
            {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        )
    if r["error_code"] != 0 or not r["topics"] or r["topics"][0]["partitions"][0]["error_code"] != 0:
        return {}
    return {n["node_id"]: [(e["name"], e["host"], e["port"]) for e in n["listeners"]] for n in r["nodes"]}


def test_a_voter_restarted_on_another_port_updates_its_endpoint(tmp_path):
    """UpdateRaftVoter (KIP-853) between real controllers: voters 1 (the leader), 2 and 3; 3 restarts with its
    controller listener on another port; once it follows the leader again (3 fetch timeouts), it sends UpdateRaftVoter
    and the leader writes a VotersRecord with the new endpoint: DescribeQuorum shows it, the voters and their
    directory ids unchanged, and the quorum still commits with 3 (the leader fetches nothing from it: 3 fetches)."""
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    common = {
        **QUORUM_TIMEOUTS,
        "controller.quorum.voters": "",
        "controller.quorum.bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()),
        "controller.listener.names": "CONTROLLER",
        "process.roles": "controller",
    }
    cluster = KRaftCluster(tmp_path, controllers=0, brokers=0)
    for i, port in ports.items():
        cluster.controllers[i] = BrokerProcess(
            tmp_path / f"controller-{i}", **{**common, "node.id": str(i)}, listeners=f"CONTROLLER://127.0.0.1:{port}"
        )
    cluster.controller_ports = ports
    c1, c2, c3 = (cluster.controllers[i] for i in (1, 2, 3))
    addr = cluster.controller_address
    pool = ThreadPoolExecutor(2)
    try:
        for node, args in (
            (c1, ("--standalone",)),
            (c2, ("--no-initial-controllers",)),
            (c3, ("--no-initial-controllers",)),
        ):
            node.write_config()
            code, out = tool("storage_tool", "format", "-t", cluster.cluster_id, "-c", str(node.config_path), *args)
            assert code == 0, out
        KRaftCluster.start_nodes([c1, c2, c3])
        adds = [
            pool.submit(
                tool,
                "metadata_quorum_command",
                "--bootstrap-controller",
                addr(1),
                "--command-config",
                str(node.config_path),
                "add-controller",
            )
            for node in (c2, c3)
        ]
        for add in adds:
            code, out = add.result()
            assert code == 0 and out.startswith("Added controller"), out
        before = voters(cluster, addr(1))
        assert set(before) == {1, 2, 3}
        assert endpoints(cluster, addr(1))[3] == [("CONTROLLER", "127.0.0.1", ports[3])]

        c3.stop(30)
        new_port = free_ports(1)[0]
        c3.props["listeners"] = f"CONTROLLER://127.0.0.1:{new_port}"
        c3.start(60)
        wait_until(
            lambda: endpoints(cluster, addr(1)).get(3) == [("CONTROLLER", "127.0.0.1", new_port)],
            20,
            message="the leader's voter set holds 3's new endpoint",
        )
        assert voters(cluster, addr(1)) == before  # same voters, same directory ids
        assert c3.wait_for_line(r"Sending UpdateRaftVoter", 1) is not None
        assert c1.wait_for_line(r"Updating a voter", 1) is not None
        # the quorum {1, 2, 3} still commits: a new metadata record reaches the high watermark on 3 as well
        code, out = tool(
            "feature_command", "--bootstrap-controller", addr(1), "downgrade", "--feature", "transaction.version=1"
        )
        assert (code, out.strip()) == (0, "transaction.version was downgraded to 1."), out
        leader_end = cluster.describe_quorum(addr(1))["high_watermark"]
        wait_until(
            lambda: (
                next(
                    v["log_end_offset"]
                    for v in cluster.describe_quorum(addr(1))["current_voters"]
                    if v["replica_id"] == 3
                )
                >= leader_end
            ),
            10,
            message="3 fetched up to the leader's high watermark",
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        cluster.kill_all()
