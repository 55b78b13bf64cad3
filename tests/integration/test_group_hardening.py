"""Group coordinator hardening against a real broker: offset commits for unknown partitions, JoinGroup
timeouts, group config resources, static membership and cooperative rebalances with real clients, a
member that never sends SyncGroup (removed after the rebalance timeout), groups loaded at election."""

from __future__ import annotations

import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    from tests.helpers.broker import BrokerProcess

    b = BrokerProcess(tmp_path_factory.mktemp("groups")).start()
    create_topic(b.bootstrap, "two", 2)
    yield b
    b.stop()


def connect(broker) -> BrokerConnection:
    """A connection to the broker once it is the coordinator for group keys (``__consumer_offsets`` exists)
    and has loaded every partition of it (ListGroups answers COORDINATOR_LOAD_IN_PROGRESS until then)."""
    conn = BrokerConnection.to(broker.bootstrap, timeout=15)
    wait_until(
        lambda: (
            conn.request(ApiKeys.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})["coordinators"][0][
                "error_code"
            ]
            == errors.NONE
        ),
        timeout=20,
        message="coordinator available",
    )
    wait_until(
        lambda: conn.request(ApiKeys.LIST_GROUPS, 4, {"states_filter": []})["error_code"] == errors.NONE,
        timeout=20,
        message="group metadata loaded",
    )
    return conn


def codes_of(resp) -> dict:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def test_offset_commit_for_unknown_topic_or_partition(gbroker):
    with connect(gbroker) as conn:
        resp = conn.request(
            ApiKeys.OFFSET_COMMIT,
            8,
            {
                "group_id": "commit-unknown",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "two",
                        "partitions": [
                            {"partition_index": 1, "committed_offset": 3},
                            {"partition_index": 7, "committed_offset": 3},
                        ],
                    },
                    {"name": "missing", "partitions": [{"partition_index": 0, "committed_offset": 3}]},
                ],
            },
        )
        assert codes_of(resp) == {
            ("two", 1): errors.NONE,
            ("two", 7): errors.UNKNOWN_TOPIC_OR_PARTITION,
            ("missing", 0): errors.UNKNOWN_TOPIC_OR_PARTITION,
        }
        fetched = conn.request(
            ApiKeys.OFFSET_FETCH, 7, {"group_id": "commit-unknown", "topics": None, "require_stable": False}
        )
        assert {
            (t["name"], p["partition_index"]): p["committed_offset"] for t in fetched["topics"] for p in t["partitions"]
        } == {("two", 1): 3}
        # Only unknown partitions: answered without touching the group.
        resp = conn.request(
            ApiKeys.OFFSET_COMMIT,
            8,
            {
                "group_id": "commit-unknown-2",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": "missing", "partitions": [{"partition_index": 0, "committed_offset": 3}]}],
            },
        )
        assert codes_of(resp) == {("missing", 0): errors.UNKNOWN_TOPIC_OR_PARTITION}
        # OffsetDelete checks the partitions the same way (KafkaApis.handleOffsetDeleteRequest).
        resp = conn.request(
            ApiKeys.OFFSET_DELETE,
            0,
            {
                "group_id": "commit-unknown",
                "topics": [{"name": "two", "partitions": [{"partition_index": 1}, {"partition_index": 9}]}],
            },
        )
        assert resp["error_code"] == errors.NONE
        assert codes_of(resp) == {("two", 1): errors.NONE, ("two", 9): errors.UNKNOWN_TOPIC_OR_PARTITION}


def test_alter_consumer_group_offsets_for_unknown_topic(gbroker):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    ok = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("alter-g", [TopicPartition("two", 0, 5)])])
    assert [tp.offset for tp in ok["alter-g"].result(20).topic_partitions] == [5]
    bad = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("alter-g", [TopicPartition("no-such-topic", 0, 5)])]
    )
    with pytest.raises(KafkaException) as info:
        result = bad["alter-g"].result(20)
        # some client versions report the error per partition instead of failing the future
        errs = [tp.error for tp in result.topic_partitions if tp.error is not None]
        if errs:
            raise KafkaException(errs[0])
    assert "UNKNOWN_TOPIC_OR_PART" in str(info.value)


def _consumer(bootstrap, group, topic, events, name, **extra):
    """A confluent-kafka consumer recording ``(kind, sorted partitions)`` per rebalance callback in ``events[name]``."""
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }
    conf.update(extra)
    c = Consumer(conf)
    log = events.setdefault(name, [])
    c.subscribe(
        [topic],
        on_assign=lambda _c, ps: log.append(("assign", sorted(p.partition for p in ps))),
        on_revoke=lambda _c, ps: log.append(("revoke", sorted(p.partition for p in ps))),
        on_lost=lambda _c, ps: log.append(("lost", sorted(p.partition for p in ps))),
    )
    return c


def _poll_until(consumers, condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.02)
        if condition():
            return True
    return condition()


def _owned(c) -> list[int]:
    return sorted(p.partition for p in c.assignment())


def test_cooperative_sticky_member_leaving_gives_one_incremental_assign_to_the_others(gbroker):
    create_topic(gbroker.bootstrap, "coop6", 6)
    events: dict[str, list] = {}
    cs = {
        n: _consumer(
            gbroker.bootstrap, "coop-g", "coop6", events, n, **{"partition.assignment.strategy": "cooperative-sticky"}
        )
        for n in ("c0", "c1", "c2")
    }
    try:
        assert _poll_until(cs.values(), lambda: all(len(_owned(c)) == 2 for c in cs.values()), 20), events
        freed = _owned(cs["c2"])
        for log in events.values():
            log.clear()
        cs.pop("c2").close()
        assert events["c2"] == [("revoke", freed)]
        assert _poll_until(cs.values(), lambda: sum(len(_owned(c)) for c in cs.values()) == 6, 15), events
        # stay a few heartbeat intervals longer: no further rebalance may follow
        _poll_until(cs.values(), lambda: False, 1.5)
        for n in ("c0", "c1"):
            assert [kind for kind, _ in events[n]] == ["assign"], events
        assert sorted(events["c0"][0][1] + events["c1"][0][1]) == freed
        assert sorted(_owned(cs["c0"]) + _owned(cs["c1"])) == list(range(6))
    finally:
        for c in cs.values():
            c.close()


def test_static_member_restart_gets_its_assignment_back_without_rebalancing_the_others(gbroker):
    create_topic(gbroker.bootstrap, "static4", 4)
    events: dict[str, list] = {}
    a = _consumer(gbroker.bootstrap, "static-g", "static4", events, "a", **{"group.instance.id": "inst-a"})
    b = _consumer(gbroker.bootstrap, "static-g", "static4", events, "b", **{"group.instance.id": "inst-b"})
    b2 = None
    try:
        assert _poll_until([a, b], lambda: len(_owned(a)) == len(_owned(b)) == 2, 20), events
        b_parts, a_parts = _owned(b), _owned(a)
        events["a"].clear()
        b.close()  # a static member sends no LeaveGroup: its place is kept
        b2 = _consumer(gbroker.bootstrap, "static-g", "static4", events, "b2", **{"group.instance.id": "inst-b"})
        assert _poll_until([a, b2], lambda: _owned(b2) == b_parts, 15), events
        _poll_until([a, b2], lambda: False, 1.0)
        assert events["b2"] == [("assign", b_parts)]
        assert events["a"] == [] and _owned(a) == a_parts, events
    finally:
        a.close()
        if b2 is not None:
            b2.close()


def test_cooperative_members_starting_within_the_initial_delay_share_one_rebalance(broker_factory):
    """The initial rebalance delay extends while members keep arriving (Kafka's InitialDelayedJoin), so
    consumers started one after another each see exactly one assignment and no revocation."""
    b = broker_factory("delayed", **{"group.initial.rebalance.delay.ms": "1000"})
    create_topic(b.bootstrap, "coop-late", 6)
    events: dict[str, list] = {}
    cs = {}
    try:
        for n in ("c0", "c1", "c2"):
            cs[n] = _consumer(
                b.bootstrap, "late-g", "coop-late", events, n, **{"partition.assignment.strategy": "cooperative-sticky"}
            )
            _poll_until(cs.values(), lambda: False, 0.6)  # the next one starts within the (extended) delay
        assert _poll_until(cs.values(), lambda: all(len(_owned(c)) == 2 for c in cs.values()), 20), events
        _poll_until(cs.values(), lambda: False, 1.0)
        assert all(log == [("assign", _owned(cs[n]))] for n, log in events.items()), events
    finally:
        for c in cs.values():
            c.close()


def _describe_group_configs(conn, group):
    resp = conn.request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    (result,) = resp["results"]
    return result["error_code"], {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def _alter_group_configs(conn, group, ops, validate_only=False):
    resp = conn.request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        {
            "resources": [
                {
                    "resource_type": 32,
                    "resource_name": group,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return resp["responses"][0]["error_code"]


def test_group_config_resources_describe_and_alter(gbroker):
    with connect(gbroker) as conn:
        # no overrides: Kafka's defaults (group.consumer.*), source DEFAULT_CONFIG (5)
        assert _describe_group_configs(conn, "cfg-g") == (
            errors.NONE,
            {
                "consumer.session.timeout.ms": ("45000", 5),
                "consumer.heartbeat.interval.ms": ("5000", 5),
                "share.session.timeout.ms": ("45000", 5),
                "share.heartbeat.interval.ms": ("5000", 5),
                "share.record.lock.duration.ms": ("30000", 5),
                "share.auto.offset.reset": ("latest", 5),
                "share.isolation.level": ("read_uncommitted", 5),
            },
        )
        assert _alter_group_configs(conn, "cfg-g", [("consumer.session.timeout.ms", 0, "50000")]) == errors.NONE
        assert wait_until(
            lambda: _describe_group_configs(conn, "cfg-g")[1]["consumer.session.timeout.ms"] == ("50000", 8),
            timeout=10,
            message="override visible as GROUP_CONFIG (8)",
        )
        assert _describe_group_configs(conn, "other-g")[1]["consumer.session.timeout.ms"] == ("45000", 5)
        for ops, code in [
            ([("consumer.session.timeout.ms", 0, "1000")], errors.INVALID_CONFIG),
            ([("consumer.heartbeat.interval.ms", 0, "x")], errors.INVALID_CONFIG),
            ([("share.unknown.config", 0, "45000")], errors.INVALID_CONFIG),
            ([("share.auto.offset.reset", 0, "newest")], errors.INVALID_CONFIG),
            ([("share.record.lock.duration.ms", 0, "100")], errors.INVALID_CONFIG),
        ]:
            assert _alter_group_configs(conn, "cfg-g", ops) == code, ops
        assert _alter_group_configs(conn, "", [("consumer.session.timeout.ms", 0, "50000")]) == errors.INVALID_REQUEST
        assert _describe_group_configs(conn, "")[0] == errors.INVALID_REQUEST
        assert _alter_group_configs(conn, "cfg-g", [("consumer.session.timeout.ms", 1, None)]) == errors.NONE
        assert wait_until(
            lambda: _describe_group_configs(conn, "cfg-g")[1]["consumer.session.timeout.ms"] == ("45000", 5),
            timeout=10,
            message="override removed",
        )


def test_group_configs_with_the_confluent_admin_client(gbroker):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        "admin-cfg-g",
        incremental_configs=[
            ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(20)

    def described():
        entries = admin.describe_configs([ConfigResource(ResourceType.GROUP, "admin-cfg-g")])
        return {n: (e.value, e.source) for n, e in next(iter(entries.values())).result(20).items()}

    wait_until(lambda: described()["consumer.heartbeat.interval.ms"][0] == "6000", timeout=10, message="override")
    assert described() == {
        "consumer.heartbeat.interval.ms": ("6000", ConfigSource.GROUP_CONFIG.value),
        "consumer.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
        "share.auto.offset.reset": ("earliest", ConfigSource.GROUP_CONFIG.value),
        "share.isolation.level": ("read_committed", ConfigSource.GROUP_CONFIG.value),
        "share.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value),
        "share.record.lock.duration.ms": ("30000", ConfigSource.DEFAULT_CONFIG.value),
        "share.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
    }


def _join(conn, group, member_id, rebalance_timeout_ms, session_timeout_ms=30000) -> int:
    """Send a JoinGroup v5 (dynamic member) without waiting for its answer; returns its correlation id."""
    return conn.send(
        ApiKeys.JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": rebalance_timeout_ms,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"sub"}],
        },
    )


def _joined(conn, group, rebalance_timeout_ms, session_timeout_ms=30000) -> str:
    """The member id the broker hands out (KIP-394: the first JoinGroup answers MEMBER_ID_REQUIRED)."""
    _join(conn, group, "", rebalance_timeout_ms, session_timeout_ms)
    first = conn.receive()[1]
    assert first["error_code"] == errors.MEMBER_ID_REQUIRED, first
    return first["member_id"]


def _sync(conn, group, generation, member_id, assignments) -> dict:
    return conn.request(
        ApiKeys.SYNC_GROUP,
        3,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        },
    )


def _heartbeat(conn, group, generation, member_id) -> int:
    return conn.request(
        ApiKeys.HEARTBEAT,
        3,
        {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None},
    )["error_code"]


def test_member_that_never_sends_sync_group_is_removed_after_the_rebalance_timeout(gbroker):
    """Kafka's pending-sync timeout (KIP-814's completion, DelayedSync): two members join, only the leader
    sends SyncGroup; after the rebalance timeout (1 s here; the other's session timeout is 30 s) the other
    is removed and the group rebalances with the leader alone."""
    group = "pending-sync-g"
    with connect(gbroker) as a, connect(gbroker) as b:
        ids = {a: _joined(a, group, 1000), b: _joined(b, group, 1000)}
        for conn, member_id in ids.items():
            _join(conn, group, member_id, 1000)  # the first waits for the other: its id is pending
        joins = {conn: conn.receive()[1] for conn in ids}
        assert all(j["error_code"] == errors.NONE for j in joins.values()), joins
        generation, leader_id = joins[a]["generation_id"], joins[a]["leader"]
        leader = a if ids[a] == leader_id else b
        other = b if leader is a else a
        assert {m["member_id"] for m in joins[leader]["members"]} == set(ids.values())
        sync = _sync(leader, group, generation, leader_id, {m: m.encode() for m in ids.values()})
        assert sync["error_code"] == errors.NONE
        # The other member never sends SyncGroup. The leader heartbeats until the group rebalances.
        wait_until(
            lambda: _heartbeat(leader, group, generation, leader_id) == errors.REBALANCE_IN_PROGRESS,
            timeout=10,
            interval=0.2,
            message="the group rebalancing after the pending sync timeout",
        )
        assert _heartbeat(other, group, generation, ids[other]) == errors.UNKNOWN_MEMBER_ID
        _join(leader, group, leader_id, 1000)
        again = leader.receive()[1]
        assert (again["error_code"], again["generation_id"]) == (errors.NONE, generation + 1)
        assert [m["member_id"] for m in again["members"]] == [leader_id]
        assert _sync(leader, group, generation + 1, leader_id, {leader_id: b"a"})["error_code"] == errors.NONE
        (described,) = leader.request(
            ApiKeys.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}
        )["groups"]
        assert described["group_state"] == "Stable"
        assert [m["member_id"] for m in described["members"]] == [leader_id]
    assert "Traceback" not in gbroker.output()


def test_groups_load_at_election_without_any_request(tmp_path):
    """On becoming leader of a ``__consumer_offsets`` partition the broker loads its groups in the
    background (Kafka's scheduleLoadGroupAndOffsets), not on the first request: after a restart the load
    completes with no group request sent, and the group is then listed with its offsets."""
    from tests.helpers.broker import BrokerProcess

    b = BrokerProcess(tmp_path / "broker").start()
    try:
        create_topic(b.bootstrap, "loaded", 1)
        with connect(b) as conn:
            committed = conn.request(
                ApiKeys.OFFSET_COMMIT,
                8,
                {
                    "group_id": "loaded-g",
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [{"name": "loaded", "partitions": [{"partition_index": 0, "committed_offset": 17}]}],
                },
            )
            assert codes_of(committed) == {("loaded", 0): errors.NONE}
        b.stop()
        start = len(b.lines)
        b.start()
        # No group request yet: the partitions led at start-up load on their own.
        loaded = b.wait_for_line(r"Finished loading offsets and group metadata from __consumer_offsets-\d+", 20, start)
        assert loaded is not None, "\n".join(b.lines[start:])[-4000:]
        with connect(b) as conn:
            listed = conn.request(ApiKeys.LIST_GROUPS, 4, {"states_filter": []})
            assert listed["error_code"] == errors.NONE
            assert [(g["group_id"], g["group_state"]) for g in listed["groups"]] == [("loaded-g", "Empty")]
            fetched = conn.request(
                ApiKeys.OFFSET_FETCH, 7, {"group_id": "loaded-g", "topics": None, "require_stable": False}
            )
            assert codes_of(fetched) == {("loaded", 0): errors.NONE}
            assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 17
    finally:
        b.stop()
    assert "Traceback" not in b.output()


def test_delete_groups_with_a_repeated_name_answers_once_per_group(gbroker):
    """Kafka answers the distinct group ids; a repeated name used to leave the request unanswered."""
    with connect(gbroker) as conn:
        r = conn.request(ApiKeys.DELETE_GROUPS, 2, {"groups_names": ["never-there", "", "never-there"]})
        assert [(g["group_id"], g["error_code"]) for g in r["results"]] == [
            ("never-there", errors.GROUP_ID_NOT_FOUND),
            ("", errors.GROUP_ID_NOT_FOUND),
        ]
