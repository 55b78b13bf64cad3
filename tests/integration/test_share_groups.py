"""Share groups (KIP-932) against a real broker: a confluent_kafka ShareConsumer (librdkafka's ShareGroupHeartbeat
v1) joins, gets the subscribed partitions from the server-side simple assignor, leaves on close, and is fenced when
its session expires; ShareGroupDescribe, ListGroups (type share), DescribeGroups and DeleteGroups of share groups;
a share group id is of one type only; the group survives a broker restart (its records in __consumer_offsets)."""

from __future__ import annotations

import threading
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

#: short session timeouts (the broker's bounds lowered so that the group config may go down too)
SHORT = {
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "3000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
}


def describe(bootstrap: str, group: str) -> dict:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(ApiKeys.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    return r["groups"][0]


def assigned(described: dict) -> dict[str, list[tuple[str, int]]]:
    return {
        m["member_id"]: sorted(
            (tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"]
        )
        for m in described["members"]
    }


class Polling:
    """A ShareConsumer polled on its own thread (the client heartbeats from its background thread, but the
    application must keep polling); ``close()`` leaves the group."""

    def __init__(self, bootstrap: str, group: str, topics: list[str]):
        from confluent_kafka import ShareConsumer

        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.consumer.subscribe(topics)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.consumer.poll(0.2)
            except Exception:  # noqa: BLE001 - the data path's errors are not what these tests look at
                self._stop.wait(0.2)

    def stop_polling(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close()


@pytest.fixture
def share_broker(broker_factory):
    return broker_factory(**SHORT)


def test_share_consumers_join_share_the_partitions_and_leave(share_broker):
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "sq", partitions=4)
    first = Polling(bootstrap, "sg", ["sq"])
    try:
        wait_until(
            lambda: describe(bootstrap, "sg")["error_code"] == 0 and len(describe(bootstrap, "sg")["members"]) == 1,
            20,
            message="first member joined",
        )
        wait_until(
            lambda: list(assigned(describe(bootstrap, "sg")).values()) == [[("sq", p) for p in range(4)]],
            20,
            message="all 4 partitions to the only member",
        )
        group = describe(bootstrap, "sg")
        assert group["group_state"] == "Stable" and group["assignor_name"] == "simple"
        second = Polling(bootstrap, "sg", ["sq"])
        try:

            def balanced() -> bool:
                a = assigned(describe(bootstrap, "sg"))
                return (
                    len(a) == 2
                    and all(len(ps) == 2 for ps in a.values())
                    and sorted(p for ps in a.values() for p in ps) == [("sq", p) for p in range(4)]
                )

            wait_until(balanced, 20, message="two members with 2 partitions each")
        finally:
            second.close()
        wait_until(lambda: len(describe(bootstrap, "sg")["members"]) == 1, 20, message="the closed member left")
        wait_until(
            lambda: list(assigned(describe(bootstrap, "sg")).values()) == [[("sq", p) for p in range(4)]],
            20,
            message="all partitions back to the remaining member",
        )
    finally:
        first.close()
    wait_until(lambda: describe(bootstrap, "sg")["group_state"] == "Empty", 20, message="group empty")


_COORDINATOR_ERRORS = (errors.COORDINATOR_LOAD_IN_PROGRESS, errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR)


def heartbeat(bootstrap: str, group: str, member_id: str, epoch: int, topics: list[str] | None) -> dict:
    """One ShareGroupHeartbeat v1 to the (single) broker, retried while ``__consumer_offsets`` is being created
    (FindCoordinator creates it) or loaded."""
    body = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": topics,
    }
    with BrokerConnection.to(bootstrap) as c:
        deadline = time.monotonic() + 30
        while True:
            c.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})  # creates the topic
            r = c.request(ApiKeys.SHARE_GROUP_HEARTBEAT, 1, body)
            if r["error_code"] not in _COORDINATOR_ERRORS or time.monotonic() > deadline:
                return r
            time.sleep(0.1)


def heartbeat_until_assigned(bootstrap: str, group: str, member_id: str, epoch: int) -> dict:
    """Heartbeats of a member at ``epoch`` until one answers a newer epoch: the assignment of its partitions, once the
    coordinator has initialized their share-partition state (a new group's first heartbeat answers none)."""
    out: list[dict] = []

    def assigned() -> bool:
        out.append(heartbeat(bootstrap, group, member_id, epoch, None))
        return out[-1]["member_epoch"] > epoch

    wait_until(assigned, 15, message="partitions assigned")
    return out[-1]


def test_a_member_that_stops_heartbeating_is_fenced_after_the_group_session_timeout(share_broker):
    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "sx", partitions=2)
    with BrokerConnection.to(bootstrap) as c:  # the group's own session timeout: 1.5 s (the broker's is 3 s)
        r = c.request(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": "sx-g",
                        "configs": [{"name": "share.session.timeout.ms", "config_operation": 0, "value": "1500"}],
                    }
                ],
                "validate_only": False,
            },
        )
        assert r["responses"][0]["error_code"] == 0
    joined = heartbeat(bootstrap, "sx-g", "m1", 0, ["sx"])
    assert (joined["error_code"], joined["member_epoch"], joined["heartbeat_interval_ms"]) == (0, 1, 500)
    assert joined["assignment"]["topic_partitions"] == []  # the partitions' state is initialized first
    again = heartbeat_until_assigned(bootstrap, "sx-g", "m1", 1)
    assert again["member_epoch"] == 2 and len(again["assignment"]["topic_partitions"][0]["partitions"]) == 2
    started = time.monotonic()
    wait_until(lambda: describe(bootstrap, "sx-g")["group_state"] == "Empty", 15, message="member fenced")
    assert time.monotonic() - started >= 1.0
    assert heartbeat(bootstrap, "sx-g", "m1", 2, None)["error_code"] == errors.UNKNOWN_MEMBER_ID


def test_group_types_list_describe_and_delete(share_broker):
    from confluent_kafka import Consumer

    bootstrap = share_broker.bootstrap
    create_topic(bootstrap, "st", partitions=1)
    assert heartbeat(bootstrap, "shared", "m1", 0, ["st"])["error_code"] == 0
    # a classic consumer cannot use the share group's id
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "shared", "session.timeout.ms": 6000})
    consumer.subscribe(["st"])
    try:
        msg = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                break
        assert msg is not None and msg.error().code() == errors.INCONSISTENT_GROUP_PROTOCOL
    finally:
        consumer.close()
    # and a share member cannot use a consumer group's id
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": "kip848",
                "member_id": "c1",
                "member_epoch": 0,
                "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": ["st"],
                "topic_partitions": [],
            },
        )
        assert r["error_code"] == 0
        listed = c.request(ApiKeys.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert [(g["group_id"], g["group_type"], g["protocol_type"], g["group_state"]) for g in listed["groups"]] == [
            ("shared", "share", "share", "Stable")
        ]
        (described,) = c.request(
            ApiKeys.DESCRIBE_GROUPS, 6, {"groups": ["shared"], "include_authorized_operations": False}
        )["groups"]
        assert described["error_code"] == errors.GROUP_ID_NOT_FOUND  # DescribeGroups: classic groups only
        (busy,) = c.request(ApiKeys.DELETE_GROUPS, 2, {"groups_names": ["shared"]})["results"]
        assert busy["error_code"] == errors.NON_EMPTY_GROUP
    fenced = heartbeat(bootstrap, "kip848", "s1", 0, ["st"])
    assert (fenced["error_code"], fenced["error_message"]) == (
        errors.GROUP_ID_NOT_FOUND,
        "Group kip848 is not a share group.",
    )
    assert heartbeat(bootstrap, "shared", "m1", -1, None)["member_epoch"] == -1
    with BrokerConnection.to(bootstrap) as c:
        (deleted,) = c.request(ApiKeys.DELETE_GROUPS, 2, {"groups_names": ["shared"]})["results"]
        assert deleted["error_code"] == errors.NONE
    assert describe(bootstrap, "shared")["error_code"] == errors.GROUP_ID_NOT_FOUND


def test_share_group_survives_a_broker_restart(broker_factory):
    b = broker_factory()
    create_topic(b.bootstrap, "sr", partitions=3)
    assert heartbeat(b.bootstrap, "kept", "m1", 0, ["sr"])["member_epoch"] == 1
    assert heartbeat(b.bootstrap, "kept", "m2", 0, ["sr"])["member_epoch"] == 2
    b.restart()
    wait_until(lambda: describe(b.bootstrap, "kept")["error_code"] == 0, 30, message="group loaded")
    group = describe(b.bootstrap, "kept")
    assert (group["group_epoch"], group["assignment_epoch"]) == (2, 2)
    assert sorted(m["member_id"] for m in group["members"]) == ["m1", "m2"]
    # m1 carries on from its epoch without rejoining, and gets its share of the partitions
    r = heartbeat(b.bootstrap, "kept", "m1", 1, None)
    assert (r["error_code"], r["member_epoch"]) == (0, 2)


def share_groups_tool(bootstrap: str, *args: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.share_group_command", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kafka_share_groups_tool(broker):
    from confluent_kafka import Producer

    bootstrap = broker.bootstrap
    create_topic(bootstrap, "tt", partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("tt", str(i).encode(), partition=i % 2)
    assert producer.flush(10) == 0
    assert heartbeat(bootstrap, "tg", "member-1", 0, ["tt"])["member_epoch"] == 1
    assert heartbeat_until_assigned(bootstrap, "tg", "member-1", 1)["member_epoch"] == 2

    def run(*args: str) -> list[str]:
        r = share_groups_tool(bootstrap, *args)
        assert r.returncode == 0, r.stderr
        return [line.split() for line in r.stdout.splitlines() if line.strip()]

    assert run("--list") == [["tg"]]
    assert run("--list", "--state") == [["GROUP", "STATE"], ["tg", "Stable"]]
    assert run("--describe", "--group", "tg", "--members", "--verbose") == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"],
        ["tg", "member-1", "/127.0.0.1", "pykbroker", "2", "2", "tt:0,tt:1"],
    ]
    state = run("--describe", "--group", "tg", "--state")
    assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
    assert state[1][0] == "tg" and state[1][-2:] == ["Stable", "1"]
    # assigned partitions without state yet
    assert run("--describe", "--group", "tg", "--offsets") == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        ["tg", "tt", "0", "-", "-"],
        ["tg", "tt", "1", "-", "-"],
    ]
    assert run("--describe", "--group", "tg", "--offsets", "--verbose")[0] == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "LEADER-EPOCH",
        "START-OFFSET",
        "LAG",
    ]
    busy = share_groups_tool(bootstrap, "--reset-offsets", "--group", "tg", "--topic", "tt", "--to-latest", "--execute")
    assert busy.returncode == 1 and "offsets can only be reset if the group is inactive" in busy.stderr
    assert heartbeat(bootstrap, "tg", "member-1", -1, None)["member_epoch"] == -1
    plan = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["tg", "tt", "0", "5"], ["tg", "tt", "1", "5"]]
    assert run("--reset-offsets", "--group", "tg", "--topic", "tt", "--to-latest", "--dry-run") == plan
    assert run("--describe", "--group", "tg")[1:] == [["tg", "tt", "0", "-", "-"], ["tg", "tt", "1", "-", "-"]]
    assert run("--reset-offsets", "--group", "tg", "--topic", "tt:1", "--to-latest", "--execute") == [
        plan[0],
        plan[2],
    ]
    # KIP-1226 lag: a reset state has no completed delivery, so its lag is the high watermark minus the start offset
    assert run("--describe", "--group", "tg")[1:] == [["tg", "tt", "0", "-", "-"], ["tg", "tt", "1", "5", "0"]]
    assert run(
        "--reset-offsets", "--group", "tg", "--all-topics", "--to-datetime", "2000-01-01T00:00:00.000", "--execute"
    )[1:] == [["tg", "tt", "0", "0"], ["tg", "tt", "1", "0"]]
    assert run("--describe", "--group", "tg")[1:] == [["tg", "tt", "0", "0", "5"], ["tg", "tt", "1", "0", "5"]]
    deleted = share_groups_tool(bootstrap, "--delete-offsets", "--group", "tg", "--topic", "tt", "--topic", "nope")
    assert deleted.returncode == 1
    assert [line.split(None, 1) for line in deleted.stdout.splitlines()] == [
        ["TOPIC", "STATUS"],
        ["tt", "Successful"],
        ["nope", "Error: The topic does not exist."],
    ]
    assert run("--describe", "--group", "tg") == []  # no state left, no members
    assert run("--delete", "--group", "tg") == [
        ["Deletion", "of", "requested", "share", "groups", "('tg')", "was", "successful."]
    ]
    gone = share_groups_tool(bootstrap, "--describe", "--group", "tg")
    assert "Error: Share group 'tg' does not exist." in gone.stdout
