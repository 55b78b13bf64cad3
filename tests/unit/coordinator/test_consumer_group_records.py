"""KIP-848 consumer groups in ``__consumer_offsets`` (Kafka's ConsumerGroup* records, key versions 3..8): the records
the coordinator writes when the group changes (none for a plain heartbeat), their replay on a new coordinator with
epochs, assignments and target intact (members carry on without a rebalance, their session timers restarted), and
the tombstones of a member leaving and of a deleted group."""

from __future__ import annotations

import struct
import uuid
from types import SimpleNamespace

import pytest

from pykbroker.coordinator.group.consumer import record_codec as rc
from pykbroker.coordinator.group.consumer.member import MemberState
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.server.append_result import ProducePartitionResult
from tests.helpers.wait import wait_until
from tests.unit.coordinator.harness import Harness
from tests.unit.coordinator.test_consumer_group import T1, _image, _owned, _parts, hb

SESSION_MS = 45000  # group.consumer.session.timeout.ms's default


@pytest.fixture
def h():
    harness = Harness()
    harness.topics = {"t": (T1, 6)}
    harness.coordinator.consumer.image = lambda: _image(harness.topics)
    yield harness
    harness.close()


def written(h) -> list[tuple[bytes, bytes | None]]:
    """Every record appended so far, in order."""
    out = []
    for entries in h.replica_manager.appended:
        for data in entries.values():
            for _, batch in iter_batches(memoryview(bytes(data))):
                out += [(bytes(r.key), None if r.value is None else bytes(r.value)) for r in batch.records()]
    return out


def consumer_types(records) -> list[tuple[int, bool]]:
    """``[(key version, is a tombstone)]`` of the consumer group records."""
    return [
        (struct.unpack_from(">h", k)[0], v is None)
        for k, v in records
        if struct.unpack_from(">h", k)[0] in rc.KEY_VERSIONS
    ]


class _Log:
    def __init__(self, records):
        b = MemoryRecordsBuilder(0)
        for k, v in records:
            b.append(1000, k, v)
        self.data = b.build()
        self.log_start_offset, self.log_end_offset = 0, len(records)

    def read(self, offset, max_bytes, isolation):
        return SimpleNamespace(records=SimpleNamespace(read_bytes=lambda: self.data))


def failover(h, group="g"):
    """The group's partition moves away and comes back at a new epoch over a log of what was written: a new
    coordinator loading it."""
    records = written(h)
    p = h.manager.partition_for(group)
    h.coordinator.on_resignation(p, 0)
    assert h.manager.all_groups() == [] or all(g.group_id != group for g in h.manager.all_groups())
    h.manager.log_manager = SimpleNamespace(get_log=lambda topic, partition: _Log(records))
    h.coordinator.on_election(p, 1)
    h.load()


def test_codec_round_trip():
    tid = uuid.uuid4()
    assert rc.decode_key(rc.key(rc.CURRENT_MEMBER_ASSIGNMENT, "g", "m")) == (8, "g", "m")
    assert rc.decode_key(rc.key(rc.GROUP_METADATA, "g")) == (3, "g", None)
    assert rc.decode_epoch_value(rc.group_metadata_value(7)) == 7
    assert rc.decode_partition_metadata_value(rc.partition_metadata_value({"t": (tid, 3)})) == {"t": (tid, 3)}
    v = rc.member_metadata_value("i", None, "c", "/h", ("a", "b"), None, 30000, "range")
    assert rc.decode_member_metadata_value(v) == {
        "instance_id": "i",
        "rack_id": None,
        "client_id": "c",
        "client_host": "/h",
        "subscribed_topic_names": ("a", "b"),
        "subscribed_topic_regex": None,
        "rebalance_timeout_ms": 30000,
        "server_assignor": "range",
        "classic": None,
    }
    v = rc.current_assignment_value(4, 3, MemberState.UNREVOKED_PARTITIONS, {tid: {0, 2}}, {tid: {1}})
    assert rc.decode_current_assignment_value(v) == {
        "member_epoch": 4,
        "previous_member_epoch": 3,
        "state": MemberState.UNREVOKED_PARTITIONS,
        "assigned": {tid: {0, 2}},
        "pending_revocation": {tid: {1}},
    }
    # Kafka's wire form: value version 0, then int32 epoch, then an empty tagged-field section
    assert rc.group_metadata_value(7) == b"\x00\x00\x00\x00\x00\x07\x00"
    with pytest.raises(ValueError):
        rc.decode_current_assignment_value(v[:-3])


def test_group_changes_are_written_and_a_plain_heartbeat_writes_nothing(h):
    a = hb(h)
    kinds = consumer_types(written(h))
    assert {k for k, _ in kinds} == {3, 4, 5, 6, 7, 8} and not any(t for _, t in kinds)
    n = len(h.replica_manager.appended)
    hb(h, a["member_id"], 1, _owned(range(6)))  # nothing changed
    assert len(h.replica_manager.appended) == n


def test_failover_keeps_epochs_and_assignments_and_members_carry_on(h):
    a = hb(h)
    b = hb(h)
    a2 = hb(h, a["member_id"], 1, _owned(range(6)))
    kept = _parts(a2)
    hb(h, a["member_id"], 1, _owned(kept))
    b3 = hb(h, b["member_id"], 2, _owned(set()))
    before = h.coordinator.consumer.describe("g")
    assert before["group_state"] == "Stable"

    failover(h)

    after = h.coordinator.consumer.describe("g")
    key = lambda d: sorted(d["members"], key=lambda m: m["member_id"])  # noqa: E731
    assert (after["group_epoch"], after["assignment_epoch"], after["group_state"]) == (2, 2, "Stable")
    assert key(after) == key(before)
    # the members carry on at their epochs without a rebalance
    a4 = hb(h, a["member_id"], 2, _owned(kept))
    b4 = hb(h, b["member_id"], 2, _owned(_parts(b3)))
    assert (a4["error_code"], a4["member_epoch"], b4["member_epoch"]) == (0, 2, 2)
    assert h.coordinator.consumer.describe("g")["group_epoch"] == 2
    # and their session timers run: without heartbeats they are fenced after the session timeout
    h.time.sleep(SESSION_MS + 1)
    wait_until(lambda: h.coordinator.consumer.describe("g")["members"] == [], timeout=10, message="sessions expired")


def test_member_leave_and_group_delete_write_tombstones_and_replay_them(h):
    a = hb(h)
    b = hb(h)
    hb(h, a["member_id"], 1, _owned(range(6)))
    mark = len(written(h))
    hb(h, b["member_id"], -1, None, topics=None)  # b leaves
    kinds = consumer_types(written(h)[mark:])
    assert {(5, True), (7, True), (8, True)} <= set(kinds)
    failover(h)
    assert [m["member_id"] for m in h.coordinator.consumer.describe("g")["members"]] == [a["member_id"]]
    hb(h, a["member_id"], -1, None, topics=None)
    out: list = []
    h.coordinator.delete_group("g", out.append)
    assert out == [0]
    failover(h)
    assert h.manager.get_group("g") is None


def _deferred_appends(h) -> list:
    """Make ``__consumer_offsets`` appends wait: ``[(entries, callback)]`` to complete by hand."""
    pending: list = []
    h.replica_manager.append_records = lambda _t, _a, _i, entries, callback, **_kw: pending.append((entries, callback))
    return pending


def _complete(pending, code: int) -> None:
    entries, callback = pending.pop(0)
    callback({tp: ProducePartitionResult.error(code) if code else ProducePartitionResult(code) for tp in entries})


def _join_request(member_id="", epoch=0) -> dict:
    return {
        "group_id": "g",
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }


def test_heartbeat_is_answered_only_after_its_records_are_appended(h):
    pending = _deferred_appends(h)
    out: list[dict] = []
    h.coordinator.consumer.heartbeat(_join_request(), "c", "/h", out.append)
    assert out == [] and len(pending) == 1  # written, not answered yet (Kafka: write, then respond)
    _complete(pending, 0)
    assert out[0]["error_code"] == 0 and out[0]["member_epoch"] == 1 and _parts(out[0]) == set(range(6))
    member_id = out[0]["member_id"]
    # a plain heartbeat writes nothing and is answered at once; a leave waits for its tombstones
    h.coordinator.consumer.heartbeat(
        dict(_join_request(member_id, 1), rebalance_timeout_ms=-1, topic_partitions=_owned(range(6))),
        "c",
        "/h",
        out.append,
    )
    assert len(out) == 2 and out[1]["error_code"] == 0 and pending == []
    h.coordinator.consumer.heartbeat(dict(_join_request(member_id, -1)), "c", "/h", out.append)
    assert len(out) == 2 and len(pending) == 1
    _complete(pending, 0)
    assert out[2]["member_epoch"] == -1


@pytest.mark.parametrize(
    ("append_error", "answered"),
    [(6, 16), (19, 15), (7, 15), (10, -1)],  # NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, TOO_LARGE
)
def test_failed_append_answers_kafkas_error_and_the_next_change_writes_the_whole_group(h, append_error, answered):
    pending = _deferred_appends(h)
    out: list[dict] = []
    h.coordinator.consumer.heartbeat(_join_request(), "c", "/h", out.append)
    _complete(pending, append_error)
    assert (out[0]["error_code"], out[0]["member_id"]) == (answered, None)
    # the member joins again (a new member id): the whole group is written, the first member's records included
    h.coordinator.consumer.heartbeat(_join_request(), "c", "/h", out.append)
    entries, _ = pending[0]
    records = [
        (struct.unpack_from(">h", bytes(r.key))[0], r.value is None)
        for data in entries.values()
        for _, batch in iter_batches(memoryview(bytes(data)))
        for r in batch.records()
    ]
    assert records.count((rc.MEMBER_METADATA, False)) == 2
