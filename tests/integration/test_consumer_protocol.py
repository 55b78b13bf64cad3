"""KIP-848 consumer groups against a real broker with confluent-kafka's ``group.protocol=consumer`` (issue 25):
first assignment at once, partitions shared exactly and never owned twice, scaling, leave, session expiry of a
killed consumer, stale-epoch commits refused. Short session timeout and heartbeat interval set by broker config."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 3000
FAST = {
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


@pytest.fixture
def cbroker(broker_factory):
    return broker_factory(**FAST)


def produce(bootstrap, topic, n, partitions):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


class Ownership:
    """Who owns which partition, from the members' assignment callbacks; a partition assigned while another
    member still owns it is recorded as a violation."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []

    def assigned(self, name, partitions):
        with self.lock:
            for p in partitions:
                holder = self.owner.get(p.partition)
                if holder is not None and holder != name:
                    self.violations.append(f"{p.partition} assigned to {name} while owned by {holder}")
                self.owner[p.partition] = name

    def revoked(self, name, partitions):
        with self.lock:
            for p in partitions:
                if self.owner.get(p.partition) == name:
                    del self.owner[p.partition]

    def of(self, name) -> set[int]:
        with self.lock:
            return {p for p, n in self.owner.items() if n == name}

    def snapshot(self) -> dict[int, str]:
        with self.lock:
            return dict(self.owner)


class Member:
    """A confluent-kafka consumer (``group.protocol=consumer``) polled by its own thread."""

    def __init__(self, bootstrap, group, topic, name, ownership: Ownership, **extra):
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "client.id": name,
        }
        conf.update(extra)
        self.name, self.ownership = name, ownership
        self.consumer = Consumer(conf)
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, ps: ownership.assigned(name, ps),
            on_revoke=lambda _c, ps: ownership.revoked(name, ps),
            on_lost=lambda _c, ps: ownership.revoked(name, ps),
        )
        self.records: list[bytes] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop.is_set():
            m = self.consumer.poll(0.1)
            if m is not None and not m.error():
                self.records.append(m.value())

    def close(self):
        self._stop.set()
        self.thread.join(10)
        self.consumer.close()  # leaves the group (epoch -1): revokes through on_revoke


def _describe(bootstrap, group):
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False}
        )
    return r["groups"][0]


def test_consumer_protocol_reads_ten_records_at_once(cbroker):
    create_topic(cbroker.bootstrap, "cp10", 3)
    produce(cbroker.bootstrap, "cp10", 10, 3)
    own = Ownership()
    start = time.monotonic()
    m = Member(cbroker.bootstrap, "g10", "cp10", "a", own)
    try:
        wait_until(lambda: len(m.records) == 10, 10, message="10 records")
        assert time.monotonic() - start < 8
        d = _describe(cbroker.bootstrap, "g10")
        assert (d["error_code"], d["group_state"], d["assignor_name"]) == (0, "Stable", "uniform")
        assert d["members"][0]["client_id"] == "a" and d["members"][0]["member_epoch"] == d["group_epoch"]
    finally:
        m.close()
    assert sorted(int(v) for v in m.records) == list(range(10))


def test_three_members_share_six_partitions_never_owned_twice_and_scale_down(cbroker):
    create_topic(cbroker.bootstrap, "cp6", 6)
    own = Ownership()
    a = Member(cbroker.bootstrap, "g6", "cp6", "a", own)
    members = [a]
    try:
        wait_until(lambda: own.of("a") == set(range(6)), 15, message="a owns all 6")
        members.append(Member(cbroker.bootstrap, "g6", "cp6", "b", own))
        members.append(Member(cbroker.bootstrap, "g6", "cp6", "c", own))
        wait_until(lambda: all(len(own.of(n)) == 2 for n in "abc"), 20, message="each of 3 members owns 2 partitions")
        assert own.violations == []
        assert sorted(own.snapshot()) == list(range(6))
        d = _describe(cbroker.bootstrap, "g6")
        assert d["group_state"] == "Stable" and len(d["members"]) == 3
        # scale 3 -> 1: closed members leave at once, their partitions move to the one left
        for m in members[1:]:
            m.close()
        members = [a]
        wait_until(lambda: own.of("a") == set(range(6)), 15, message="a owns all 6 again")
        assert len(_describe(cbroker.bootstrap, "g6")["members"]) == 1
    finally:
        for m in members:
            m.close()
    assert own.violations == []


def test_partitions_added_to_a_subscribed_topic_are_assigned(cbroker):
    from confluent_kafka.admin import NewPartitions

    admin = create_topic(cbroker.bootstrap, "cpg", 2)
    own = Ownership()
    a = Member(cbroker.bootstrap, "gg", "cpg", "a", own, **{"topic.metadata.refresh.interval.ms": 1000})
    try:
        wait_until(lambda: own.of("a") == {0, 1}, 15, message="a owns both partitions")
        admin.create_partitions([NewPartitions("cpg", 4)])["cpg"].result(30)
        wait_until(lambda: own.of("a") == {0, 1, 2, 3}, 20, message="a gets the added partitions")
    finally:
        a.close()


def test_regex_subscription_picks_up_a_topic_created_later(cbroker):
    create_topic(cbroker.bootstrap, "rx-one", 1)
    own_by_topic: dict[str, set[int]] = {}
    lock = threading.Lock()

    def assigned(_c, ps):
        with lock:
            for p in ps:
                own_by_topic.setdefault(p.topic, set()).add(p.partition)

    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": cbroker.bootstrap,
            "group.id": "grx",
            "group.protocol": "consumer",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.subscribe(["^rx-.*"], on_assign=assigned)
    stop = threading.Event()
    poller = threading.Thread(target=lambda: [c.poll(0.1) for _ in iter(stop.is_set, True)], daemon=True)
    poller.start()
    try:
        wait_until(lambda: own_by_topic.get("rx-one") == {0}, 15, message="rx-one assigned")
        # librdkafka sends the regex itself (KIP-848): the broker resolves it
        assert "^rx-.*" in _describe(cbroker.bootstrap, "grx")["members"][0]["subscribed_topic_regex"]
        create_topic(cbroker.bootstrap, "rx-two", 2)
        wait_until(lambda: own_by_topic.get("rx-two") == {0, 1}, 20, message="rx-two assigned")
    finally:
        stop.set()
        poller.join(10)
        c.close()


def test_static_member_restart_keeps_its_partitions(cbroker):
    create_topic(cbroker.bootstrap, "cps", 4)
    own = Ownership()
    a = Member(cbroker.bootstrap, "gs", "cps", "a", own, **{"group.instance.id": "static-a"})
    b = Member(cbroker.bootstrap, "gs", "cps", "b", own)
    members = [a, b]
    try:
        wait_until(lambda: len(own.of("a")) == 2 and len(own.of("b")) == 2, 20, message="2 partitions each")
        kept, b_parts = own.of("a"), own.of("b")
        epoch = _describe(cbroker.bootstrap, "gs")["group_epoch"]
        a.close()  # a static member leaves with epoch -2: its partitions stay its own
        members = [b]
        members.append(Member(cbroker.bootstrap, "gs", "cps", "a2", own, **{"group.instance.id": "static-a"}))
        wait_until(lambda: own.of("a2") == kept, 10, message="the restarted static member gets its partitions back")
        assert own.of("b") == b_parts
        assert _describe(cbroker.bootstrap, "gs")["group_epoch"] == epoch  # no rebalance
    finally:
        for m in members:
            m.close()
    assert own.violations == []


def test_consumer_groups_tool_lists_and_describes_a_consumer_group(cbroker):
    from tests.helpers.tools import run_tool

    create_topic(cbroker.bootstrap, "cpt", 2)
    own = Ownership()
    a = Member(cbroker.bootstrap, "gt", "cpt", "tool-client", own)
    try:
        wait_until(lambda: own.of("tool-client") == {0, 1}, 15, message="assigned")
        listed = run_tool("consumer_group_command", "--bootstrap-server", cbroker.bootstrap, "--list")
        assert "gt" in listed.stdout.split(), listed
        described = run_tool(
            "consumer_group_command", "--bootstrap-server", cbroker.bootstrap, "--describe", "--group", "gt"
        )
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith("gt ")]
        assert sorted((r[1], r[2], r[-1]) for r in rows) == [("cpt", "0", "tool-client"), ("cpt", "1", "tool-client")]
        state = run_tool(
            "consumer_group_command", "--bootstrap-server", cbroker.bootstrap, "--describe", "--group", "gt", "--state"
        )
        assert state.stdout.splitlines()[-1].split()[-3:] == ["uniform", "Stable", "1"], state
    finally:
        a.close()


def test_consumer_groups_tool_type_and_verbose_columns(cbroker):
    """Kafka 4's kafka-consumer-groups: ``--list --type`` (KIP-1043) shows and filters the group types;
    ``--describe --members --verbose`` and ``--state --verbose`` print the consumer group's epochs and assignments
    (KIP-1099), ``-`` for a classic group."""
    from confluent_kafka import Consumer

    from tests.helpers.tools import run_tool

    def tool(*args: str):
        run = run_tool("consumer_group_command", "--bootstrap-server", cbroker.bootstrap, *args)
        assert run.returncode == 0, run
        return [line.split() for line in run.stdout.splitlines() if line.strip()]

    create_topic(cbroker.bootstrap, "cptv", 2)
    own = Ownership()
    a = Member(cbroker.bootstrap, "gtv", "cptv", "tv-client", own)
    classic = Consumer({"bootstrap.servers": cbroker.bootstrap, "group.id": "gtc", "enable.auto.commit": False})
    try:
        classic.subscribe(["cptv"])
        wait_until(lambda: own.of("tv-client") == {0, 1}, 15, message="assigned")
        wait_until(lambda: classic.poll(0.2) is None and classic.assignment(), 20, message="classic assigned")
        assert tool("--list", "--type") == [["GROUP", "TYPE"], ["gtc", "Classic"], ["gtv", "Consumer"]]
        assert tool("--list", "--type", "consumer", "--state") == [
            ["GROUP", "TYPE", "STATE"],
            ["gtv", "Consumer", "Stable"],
        ]
        d = _describe(cbroker.bootstrap, "gtv")
        epoch = str(d["group_epoch"])
        member = d["members"][0]["member_id"]
        assert tool("--describe", "--group", "gtv", "--members", "--verbose") == [
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT",
             "TARGET-EPOCH", "TARGET-ASSIGNMENT"],
            ["gtv", member, d["members"][0]["client_host"], "tv-client", "2", epoch, "cptv:0,1", epoch, "cptv:0,1"],
        ]  # fmt: skip
        state = tool("--describe", "--group", "gtv", "--state", "--verbose")
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                            "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]  # fmt: skip
        assert state[1][-5:] == ["uniform", "Stable", epoch, epoch, "1"]
        rows = tool("--describe", "--group", "gtc", "--members", "--verbose")
        assert rows[1][-4:] == ["-", "cptv:0,1", "-", "-"]
        bad = run_tool("consumer_group_command", "--bootstrap-server", cbroker.bootstrap, "--list", "--type", "x")
        assert bad.returncode == 1 and "Invalid types list 'x'. Valid types are: Consumer, Classic, Share" in bad.stderr
    finally:
        classic.close()
        a.close()


_KILLED_CONSUMER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "client.id": "doomed"})
c.subscribe([sys.argv[3]], on_assign=lambda _c, ps: print("ASSIGNED", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


def test_killed_member_is_fenced_after_the_session_timeout(cbroker):
    create_topic(cbroker.bootstrap, "cpk", 4)
    own = Ownership()
    a = Member(cbroker.bootstrap, "gk", "cpk", "a", own)
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CONSUMER, cbroker.bootstrap, "gk", "cpk"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        wait_until(lambda: len(own.of("a")) == 2, 20, message="a shares the topic with the subprocess")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        wait_until(lambda: own.of("a") == set(range(4)), 15, message="a gets the killed member's partitions")
        # not before the session timeout (less a heartbeat interval of slack)
        assert time.monotonic() - killed >= SESSION_MS / 1000 - 0.5
        assert [m["client_id"] for m in _describe(cbroker.bootstrap, "gk")["members"]] == ["a"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        a.close()
    assert own.violations == []


def _heartbeat(c, group, member_id, epoch, topic, owned=None):
    body = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000 if epoch == 0 else -1,
        "subscribed_topic_names": [topic] if epoch == 0 else None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [] if epoch == 0 else owned,
    }
    return c.request(ApiKeys.CONSUMER_GROUP_HEARTBEAT, 1, body)


def _commit(c, group, member_id, epoch, topic, version=9):
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 3,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    r = c.request(ApiKeys.OFFSET_COMMIT, version, body)
    return r["topics"][0]["partitions"][0]["error_code"]


def test_raw_protocol_epochs_and_stale_commits(cbroker):
    create_topic(cbroker.bootstrap, "cpr", 2)
    bootstrap = cbroker.bootstrap
    wait_until(lambda: _find_coordinator(bootstrap, "gr"), 20, message="coordinator")
    with BrokerConnection.to(bootstrap) as c:
        first = _heartbeat(c, "gr", "", 0, "cpr")
        assert first["error_code"] == 0, first
        member_id, epoch = first["member_id"], first["member_epoch"]
        assert epoch == 1 and first["heartbeat_interval_ms"] == 300
        assert sorted(first["assignment"]["topic_partitions"][0]["partitions"]) == [0, 1]
        assert _commit(c, "gr", member_id, epoch - 1, "cpr") == errors.STALE_MEMBER_EPOCH
        assert _commit(c, "gr", member_id, epoch + 1, "cpr") == errors.STALE_MEMBER_EPOCH
        assert _commit(c, "gr", "someone-else", epoch, "cpr") == errors.UNKNOWN_MEMBER_ID
        assert _commit(c, "gr", member_id, epoch, "cpr", version=8) == errors.UNSUPPORTED_VERSION
        assert _commit(c, "gr", member_id, epoch, "cpr") == errors.NONE
        fenced = _heartbeat(c, "gr", member_id, epoch + 5, "cpr", owned=[])
        assert fenced["error_code"] == errors.FENCED_MEMBER_EPOCH
        unsupported = c.request(
            ApiKeys.CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": "gr",
                "member_id": "",
                "member_epoch": 0,
                "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": ["cpr"],
                "server_assignor": "sticky",
                "topic_partitions": [],
            },
        )
        assert unsupported["error_code"] == errors.UNSUPPORTED_ASSIGNOR
        groups = c.request(ApiKeys.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})["groups"]
        assert [(g["group_id"], g["group_type"], g["protocol_type"]) for g in groups] == [
            ("gr", "consumer", "consumer")
        ]
        described = c.request(ApiKeys.DESCRIBE_GROUPS, 6, {"groups": ["gr"], "include_authorized_operations": False})
        assert described["groups"][0]["error_code"] == errors.GROUP_ID_NOT_FOUND
        left = _heartbeat(c, "gr", member_id, -1, "cpr")
        assert (left["error_code"], left["member_epoch"]) == (0, -1)


def _find_coordinator(bootstrap, group) -> bool:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
    return r["coordinators"][0]["error_code"] == 0


def test_consumer_apis_not_advertised_without_the_consumer_protocol(broker_factory):
    b = broker_factory(**{"group.coordinator.rebalance.protocols": "classic"})
    with BrokerConnection.to(b.bootstrap) as c:
        keys = {k["api_key"] for k in c.request(ApiKeys.API_VERSIONS, 3, {})["api_keys"]}
    assert ApiKeys.CONSUMER_GROUP_HEARTBEAT not in keys and ApiKeys.JOIN_GROUP in keys


def _update_group_version(bootstrap: str, level: int) -> None:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.UPDATE_FEATURES,
            1,
            {
                "timeout_ms": 30000,
                "feature_updates": [
                    {"feature": "group.version", "max_version_level": level, "upgrade_type": 1 if level else 2}
                ],
                "validate_only": False,
            },
        )
    assert r["error_code"] == errors.NONE, r


def _finalized_group_version(bootstrap: str) -> int:
    with BrokerConnection.to(bootstrap) as c:
        v = c.request(ApiKeys.API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    return {f["name"]: f["max_version_level"] for f in v["finalized_features"]}.get("group.version", 0)


def test_group_version_0_disables_the_consumer_protocol(cbroker):
    """Kafka 4's gate (``KafkaApis.isConsumerGroupProtocolEnabled``): a new cluster finalizes group.version 1; at 0
    ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION; upgraded again, they are served."""
    create_topic(cbroker.bootstrap, "cpv", 1)
    bootstrap = cbroker.bootstrap
    assert _finalized_group_version(bootstrap) == 1
    wait_until(lambda: _find_coordinator(bootstrap, "gv"), 20, message="coordinator")
    _update_group_version(bootstrap, 0)
    wait_until(lambda: _finalized_group_version(bootstrap) == 0, 10, message="group.version 0")
    with BrokerConnection.to(bootstrap) as c:
        assert _heartbeat(c, "gv", "", 0, "cpv")["error_code"] == errors.UNSUPPORTED_VERSION
        d = c.request(ApiKeys.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["gv"], "include_authorized_operations": False})
        assert [g["error_code"] for g in d["groups"]] == [errors.UNSUPPORTED_VERSION]
    _update_group_version(bootstrap, 1)
    wait_until(lambda: _finalized_group_version(bootstrap) == 1, 10, message="group.version 1")
    with BrokerConnection.to(bootstrap) as c:
        first = _heartbeat(c, "gv", "", 0, "cpv")
        assert (first["error_code"], first["member_epoch"]) == (errors.NONE, 1)
