"""Idle replica fetch sessions (issue 31): a follower's incremental KIP-227 session skips its caught-up, unchanged
partitions on the leader (no read, no fetch-state update), waits on the session when nothing is left to read, and
the parked followers' caught-up times stay exactly Kafka's (ISR shrink/expand, ``replica.lag.time.max.ms``)."""

from __future__ import annotations

import pytest

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.fetch_session import FetchManager, FetchSessionCache
from pykbroker.server.handlers.fetch import FetchHandler
from pykbroker.server.replica import FollowerFetchClock, Replica
from pykbroker.utils.time import MockTime
from tests.unit.server.apis_harness import LocalBroker, decode_sent, records
from tests.unit.server.test_handlers import Apis
from tests.unit.server.test_partition_replication import (
    LAG_MS,
    RecordingAlterPartitionManager,
    append,
    make_partition,
    reg,
)

FOLLOWER = 5
VERSION = 12  # topics by name, replica_id at the top level
PARTITIONS = 3


# -- Replica / Partition: the parked follower's times ---------------------------------------------------------


@pytest.fixture
def time():
    return MockTime(current_ms=1_000_000)


def test_a_parked_replica_reads_the_session_clock_and_writes_it_back_when_unparked():
    r = Replica(2)
    r.update_fetch_state(fetch_offset=10, log_start_offset=0, fetch_time_ms=100, leader_end_offset=10)
    clock = FollowerFetchClock(100)
    r.park(clock)
    clock.fetch_time_ms = 700  # later session fetches skipped the partition
    assert (r.last_fetch_time_ms, r.last_caught_up_time_ms) == (700, 700)
    # The leader appended after the fetch at 700: the next read sees the follower behind, caught up as of 700.
    r.update_fetch_state(fetch_offset=10, log_start_offset=0, fetch_time_ms=900, leader_end_offset=15)
    assert r.parked is None
    assert (r.last_fetch_time_ms, r.last_caught_up_time_ms) == (900, 700)
    clock.fetch_time_ms = 5000  # no longer followed
    assert r.last_caught_up_time_ms == 700


def _caught_up_follower(tmp_path, time):
    p, apm, _, _ = make_partition(tmp_path, time)
    p.make_leader(reg((1, 2, 3)))
    append(p)
    for replica in (2, 3):
        p.update_follower_fetch_state(replica, 2, 0, time.milliseconds(), p.log.log_end_offset)
    assert p.log.high_watermark == 2
    return p, apm


def test_park_only_a_caught_up_isr_follower_whose_offsets_were_just_sent(tmp_path, time):
    p, _ = _caught_up_follower(tmp_path, time)
    changes: list[str] = []
    clock = FollowerFetchClock(time.milliseconds())
    assert not p.park_follower(2, 1, 2, 0, clock, 7, lambda: changes.append("x"))  # not at the LEO
    assert not p.park_follower(2, 2, 1, 0, clock, 7, lambda: changes.append("x"))  # an HW it was not sent
    assert not p.park_follower(4, 2, 2, 0, clock, 7, lambda: changes.append("x"))  # not a replica
    p.remote_replicas[3].update_fetch_state(2, 0, time.milliseconds(), 2)
    p.isr = p.maximal_isr = (1, 2)
    assert not p.park_follower(3, 2, 2, 0, clock, 8, lambda: changes.append("x"))  # not in the ISR
    assert p.park_follower(2, 2, 2, 0, clock, 7, lambda: changes.append("x"))
    assert p.remote_replicas[2].parked is clock
    assert changes == []


@pytest.mark.parametrize("change", ["append", "delete_records", "new_leader_epoch", "become_follower"])
def test_any_change_of_the_partition_notifies_the_parked_session_once(tmp_path, time, change):
    p, _ = _caught_up_follower(tmp_path, time)
    changes: list[int] = []
    assert p.park_follower(2, 2, 2, 0, FollowerFetchClock(0), 7, lambda: changes.append(7))
    if change == "append":
        append(p, acks=1)
    elif change == "delete_records":
        p.delete_records_on_leader(1)
    elif change == "new_leader_epoch":
        p.make_leader(reg((1, 2, 3), leader_epoch=1, partition_epoch=1))
    else:
        p.make_follower(reg((1, 2, 3), leader=2, leader_epoch=1, partition_epoch=1))
    assert changes == [7]
    p.notify_fetch_watchers()
    assert changes == [7]  # it must park again to hear of the next change


def test_isr_shrink_of_a_parked_follower_is_kafkas(tmp_path, time):
    """The follower fetches at the LEO at t0 (parked), then its session keeps fetching (clock) without reading the
    partition; the leader appends at t1 and the follower stops fetching: it leaves the ISR exactly
    ``replica.lag.time.max.ms`` after its last fetch, as with a per-partition fetch-state update."""
    p, apm = _caught_up_follower(tmp_path, time)
    clock = FollowerFetchClock(time.milliseconds())
    assert p.park_follower(2, 2, 2, 0, clock, 7, lambda: None)
    for _ in range(4):  # replica 2's session fetches every LAG_MS / 2, skipping the partition; 3 never again
        time.sleep(LAG_MS // 2)
        clock.fetch_time_ms = time.milliseconds()
        assert not p.maybe_shrink_isr()  # both at the LEO: caught up whatever the time
    last_fetch = time.milliseconds()
    append(p, acks=1)  # the LEO moves on; replica 2 stops fetching
    time.sleep(LAG_MS)
    assert p.maybe_shrink_isr()
    assert [s[0] for s in apm.submitted] == [(1, 2)]  # 3 is out (caught up only at t0); 2 fetched LAG_MS ago
    assert p.remote_replicas[2].last_caught_up_time_ms == last_fetch
    apm.answer()
    time.sleep(1)
    assert p.maybe_shrink_isr()
    assert [s[0] for s in apm.submitted] == [(1,)]


# -- the Fetch handler: an idle session reads nothing ----------------------------------------------------------


class AlterPartitions(RecordingAlterPartitionManager):
    def close(self) -> None:
        pass


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    b.add_topic("r", PARTITIONS, replicas=(1, FOLLOWER), isr=(1, FOLLOWER))
    b.replica_manager.set_alter_partition_manager(AlterPartitions())
    yield b
    b.close()


class Follower:
    """Replica 5's fetch session with the leader, through the real Fetch handler (v12, by name)."""

    def __init__(self, broker):
        self.broker = broker
        self.apis = Apis(
            broker,
            lambda h: FetchHandler(
                h, broker.replica_manager, broker.cache, FetchManager(FetchSessionCache(100), broker.time)
            ),
        )
        self.session_id = 0
        self.epoch = 0
        self.offsets = {i: 0 for i in range(PARTITIONS)}
        self.reads: list[int] = []
        rm = broker.replica_manager
        read = rm.read_from_log

        def counting_read(params, fetches, update_fetch_state=True):
            self.reads.append(len(fetches))
            return read(params, fetches, update_fetch_state)

        rm.read_from_log = counting_read

    def send(self, changed=(), max_wait_ms=0) -> None:
        parts = [
            {
                "partition": i,
                "current_leader_epoch": 0,
                "fetch_offset": self.offsets[i],
                "last_fetched_epoch": -1,
                "log_start_offset": 0,
                "partition_max_bytes": 1 << 20,
            }
            for i in (range(PARTITIONS) if self.epoch == 0 else changed)
        ]
        body = {
            "replica_id": FOLLOWER,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": self.session_id,
            "session_epoch": self.epoch,
            "topics": [{"topic": "r", "partitions": parts}] if parts else [],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        self.apis.send(ApiKeys.FETCH, VERSION, body)

    def receive(self) -> dict[int, dict]:
        """The answered partitions (the follower "appends" their records: its next fetch offset moves)."""
        response = self.apis.channel.responses.pop()
        assert self.apis.channel.responses == []
        body = decode_sent(response, ApiKeys.FETCH, VERSION)[1]
        assert body["error_code"] == errors.NONE
        self.session_id = body["session_id"]
        self.epoch += 1
        out = {p["partition_index"]: p for t in body["responses"] for p in t["partitions"]}
        return out

    def fetch(self, changed=()) -> dict[int, dict]:
        self.send(changed)
        return self.receive()

    def catch_up(self) -> None:
        rm = self.broker.replica_manager
        for i in range(PARTITIONS):
            self.offsets[i] = rm.get_partition("r", i).log.log_end_offset


def test_an_idle_incremental_session_fetch_reads_no_partition_and_waits_on_the_session(broker):
    rm = broker.replica_manager
    rm.append_records(1000, 1, False, {("r", 0): records(3)}, lambda r: None)
    f = Follower(broker)
    assert set(f.fetch()) == {0, 1, 2}  # the full fetch opens the session
    f.catch_up()
    answered = f.fetch(changed=[0])  # at the LEO everywhere: the HW moves to 3, every partition parks
    assert answered[0]["high_watermark"] == 3
    f.reads.clear()
    assert f.fetch() == {}
    assert f.reads == [0]  # nothing read: every partition parked
    f.send(max_wait_ms=500)
    assert f.apis.channel.responses == []  # waiting on the session
    assert f.reads == [0]
    rm.append_records(1000, 1, False, {("r", 1): records(2)}, lambda r: None)
    rm.try_complete_actions()  # as after the produce request: the changed partition completes the wait
    answered = f.receive()
    assert set(answered) == {1} and answered[1]["records"] is not None
    assert f.reads[1:] == [1]  # only the changed partition was read
    assert rm.fetch_purgatory.num_delayed == 0


def test_a_parked_partition_named_by_the_request_or_changed_is_read_again(broker):
    rm = broker.replica_manager
    f = Follower(broker)
    f.fetch()
    f.fetch(changed=[0])
    f.reads.clear()
    rm.append_records(1000, 1, False, {("r", 2): records(1)}, lambda r: None)
    rm.try_complete_actions()
    answered = f.fetch()
    assert set(answered) == {2} and f.reads == [1]
    f.catch_up()
    answered = f.fetch(changed=[2])  # the follower appended: the HW moves, told in this response
    assert answered[2]["high_watermark"] == 1 and f.reads[1:] == [1]
    assert f.fetch() == {} and f.reads[2:] == [0]


def test_parked_followers_stay_in_the_isr_and_a_silent_one_leaves_it_after_the_lag_time(broker):
    rm = broker.replica_manager
    time = broker.time
    lag = rm.replica_lag_time_max_ms
    f = Follower(broker)
    rm.append_records(1000, 1, False, {("r", 0): records(3)}, lambda r: None)
    f.fetch()
    f.catch_up()
    f.fetch(changed=[0])
    for _ in range(3):  # idle fetches for longer than replica.lag.time.max.ms
        time.sleep(lag // 2)
        assert f.fetch() == {}
    assert f.reads[-3:] == [0, 0, 0]
    replica = rm.get_partition("r", 0).remote_replicas[FOLLOWER]
    assert replica.last_caught_up_time_ms == time.milliseconds()
    rm.append_records(1000, 1, False, {("r", 0): records(1)}, lambda r: None)
    rm.try_complete_actions()
    time.sleep(lag - 1)
    rm.maybe_shrink_isr()
    apm = rm.alter_partition_manager
    assert apm.submitted == []  # fetched lag - 1 ms ago at the then LEO: in sync
    time.sleep(2)  # the follower is silent
    rm.maybe_shrink_isr()
    assert [(s[0]) for s in apm.submitted] == [(1,)]  # only partition 0 changed: it alone shrinks
