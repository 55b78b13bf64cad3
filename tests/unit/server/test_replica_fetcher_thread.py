"""ReplicaFetcherThread in process (Kafka's AbstractFetcherThreadTest / ReplicaFetcherThreadTest): a fake leader
behind the thread's connection factory answers Fetch, OffsetForLeaderEpoch and ListOffsets with canned bodies;
the follower's partitions are real Partitions over real UnifiedLogs in tmp_path.

Most tests drive the loop by hand (``do_work`` on the test's thread, MockTime); the last ones run the thread.
"""

from __future__ import annotations

import socket
import threading
import time as _time
import uuid
from collections.abc import Callable

import pytest

from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.partition import Partition
from pykbroker.server.replica_fetcher_thread import (
    FETCHING,
    TRUNCATING,
    BrokerEndPoint,
    PartitionFetchState,
    ReplicaFetcherThread,
)
from pykbroker.utils.time import SYSTEM, MockTime, Time
from tests.helpers.wait import wait_until
from tests.unit.log.log_test_utils import make_batch

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=7)
BACKOFF_MS = 50
BROKER_EPOCH = 11
LEADER_EPOCH = 5
CONFIG = {
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.response.max.bytes": 10 << 20,
    "replica.fetch.max.bytes": 1 << 20,
    "replica.fetch.backoff.ms": BACKOFF_MS,
    "replica.socket.timeout.ms": 30_000,
    "replica.socket.receive.buffer.bytes": 65536,
}

Handler = Callable[[dict], dict]


class FakeConnection:
    """One connection to the fake leader. With ``blocking``, a request waits on a real socket pair (whose
    socket the fetcher was handed through ``on_socket``) until the fetcher shuts it down, as a leader that
    never answers."""

    def __init__(self, leader: FakeLeader, on_socket, blocking: bool):
        self.leader = leader
        self.closed = False
        self.blocking = blocking
        self.ours, self.theirs = socket.socketpair()
        if on_socket is not None:
            on_socket(self.ours)

    def request(self, api_key: int, version: int, body: dict) -> dict:
        assert not self.closed
        self.leader.requests.append((api_key, version, body))
        if self.blocking:
            self.leader.blocked.set()
            if not self.ours.recv(1):  # "" once the fetcher shuts the socket down
                raise ConnectionError("connection interrupted")
        handler = self.leader.handlers[api_key]
        return handler(body)

    def close(self) -> None:
        self.closed = True
        self.ours.close()
        self.theirs.close()


class FakeLeader:
    """Broker 2, the leader: ``handlers[api_key](request body) -> response body`` (a handler may raise, as a
    connection error does); ``requests`` holds ``(api_key, version, body)`` in order."""

    def __init__(self):
        self.requests: list[tuple[int, int, dict]] = []
        self.handlers: dict[int, Handler] = {}
        self.connections: list[FakeConnection] = []
        self.blocking = False
        self.blocked = threading.Event()

    def connect(self, host, port, *, client_id, timeout, security, on_socket, reuse_receive_buffer=False):
        assert (host, port) == ("leader", 9092) and client_id == "broker-1-fetcher-0"
        conn = FakeConnection(self, on_socket, self.blocking)
        self.connections.append(conn)
        return conn

    def sent(self, api_key: int) -> list[dict]:
        return [body for key, _, body in self.requests if key == api_key]

    def close(self) -> None:
        for c in self.connections:
            if not c.closed:
                c.close()


class FakeReplicaManager:
    """What the fetcher asks of the ReplicaManager: this broker's id and epoch, and its partitions."""

    def __init__(self):
        self.node_id = 1
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.epoch = BROKER_EPOCH
        self.inter_broker_security = None
        self.hw_moved: list[tuple[str, int]] = []

    def get_partition(self, topic: str, index: int):
        return self.partitions.get((topic, index))

    def broker_epoch(self) -> int:
        return self.epoch

    def complete_delayed_fetch_requests(self, partitions: list[tuple[str, int]]) -> None:
        """Consumers waiting on this follower (KIP-392) are told which partitions' high watermark moved."""
        self.hw_moved.extend(partitions)


class Harness:
    def __init__(self, tmp_path, time: Time | None = None, config=CONFIG):
        self.tmp_path = tmp_path
        self.time = time or MockTime(current_ms=1_000_000)
        self.leader = FakeLeader()
        self.rm = FakeReplicaManager()
        self.fetcher = ReplicaFetcherThread(
            "ReplicaFetcherThread-0-2",
            0,
            BrokerEndPoint(2, "leader", 9092),
            self.rm,
            config,
            self.time,
            connection_factory=self.leader.connect,
        )

    def partition(self, index: int = 0) -> Partition:
        tp = (TOPIC, index)
        if tp not in self.rm.partitions:
            log = UnifiedLog.create(str(self.tmp_path / f"{TOPIC}-{index}"), LogConfig({}), None, self.time)
            self.rm.partitions[tp] = Partition(TOPIC, index, TOPIC_ID, log, 1, self.time)
        return self.rm.partitions[tp]

    def add(self, index: int = 0, fetch_offset: int = 0, state: str = TRUNCATING) -> PartitionFetchState:
        self.partition(index)
        st = PartitionFetchState(TOPIC_ID, fetch_offset, LEADER_EPOCH, state)
        self.fetcher.add_partitions({(TOPIC, index): st})
        return st

    def close(self) -> None:
        self.fetcher.shutdown()
        self.leader.close()
        for p in self.rm.partitions.values():
            p.log.close()


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


@pytest.fixture
def real_h(tmp_path):
    """The harness on the system clock, for a running thread that must see its back-off end."""
    harness = Harness(tmp_path, SYSTEM)
    yield harness
    harness.close()


def batches(start: int, counts: list[int], epoch: int = LEADER_EPOCH) -> bytes:
    out, offset = b"", start
    for n in counts:
        out += make_batch(offset, n, 10, leader_epoch=epoch)
        offset += n
    return out


def fetch_answer(
    parts: dict[int, dict] | None = None, *, hw: int = 0, log_start: int = 0, records: bytes | None = None
) -> Handler:
    """A Fetch handler: every partition asked for answers ``records`` (the first time only) with ``hw`` and
    ``log_start`` unless ``parts[index]`` gives its fields (``error_code``, ``diverging_epoch``...)."""
    answered: set[int] = set()

    def handle(body: dict) -> dict:
        topics = []
        for t in body["topics"]:
            ps = []
            for p in t["partitions"]:
                data = {
                    "partition_index": p["partition"],
                    "error_code": errors.NONE,
                    "high_watermark": hw,
                    "log_start_offset": log_start,
                    "records": None if p["partition"] in answered else records,
                }
                data.update((parts or {}).get(p["partition"], {}))
                answered.add(p["partition"])
                ps.append(data)
            topics.append({"topic_id": t["topic_id"], "partitions": ps})
        return {"error_code": errors.NONE, "responses": topics}

    return handle


def epoch_answer(by_partition: dict[int, tuple[int, int, int]]) -> Handler:
    """An OffsetForLeaderEpoch handler: ``{partition: (error, leader_epoch, end_offset)}``."""

    def handle(body: dict) -> dict:
        return {
            "topics": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        dict(
                            zip(
                                ("error_code", "leader_epoch", "end_offset"),
                                by_partition[p["partition"]],
                                strict=True,
                            ),
                            partition=p["partition"],
                        )
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }

    return handle


def list_offsets_answer(earliest: int, latest: int, error: int = errors.NONE) -> Handler:
    def handle(body: dict) -> dict:
        p = body["topics"][0]["partitions"][0]
        offset = {-2: earliest, -1: latest}[p["timestamp"]]
        return {"topics": [{"partitions": [{"error_code": error, "offset": offset}]}]}

    return handle


def follower_log(h: Harness, data: bytes, index: int = 0) -> Partition:
    """The follower's partition ``index`` holding ``data`` (appended as a follower)."""
    p = h.partition(index)
    p.append_records_as_follower(memoryview(data), leader_high_watermark=0, leader_log_start_offset=0)
    return p


# -- fetching -------------------------------------------------------------------------------------------


def test_fetch_appends_the_leaders_batches_and_takes_its_high_watermark(h):
    st = h.add(state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=4, records=batches(0, [2, 3]))
    h.fetcher.do_work()
    p = h.partition()
    assert p.log.log_end_offset == 5 and p.log.high_watermark == 4
    assert h.rm.hw_moved == [("t", 0)]  # consumer fetches parked on this follower (KIP-392) are completed
    assert p.log.latest_epoch == LEADER_EPOCH
    assert st.fetch_offset == 5 and st.state == FETCHING and st.lag == 0
    h.fetcher.do_work()  # the next fetch starts at the new log end, with the epoch of the last batch
    first, second = h.leader.sent(ApiKeys.FETCH)
    assert first["topics"][0]["partitions"][0]["fetch_offset"] == 0
    assert first["topics"][0]["partitions"][0]["last_fetched_epoch"] == -1
    assert second["topics"][0]["partitions"][0]["fetch_offset"] == 5
    assert second["topics"][0]["partitions"][0]["last_fetched_epoch"] == LEADER_EPOCH


def test_fetch_request_is_kafkas_replica_fetch(h):
    h.add(state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    [(key, version, body)] = h.leader.requests
    assert (key, version) == (ApiKeys.FETCH, 15)
    assert body["replica_state"] == {"replica_id": 1, "replica_epoch": BROKER_EPOCH}
    assert (body["max_wait_ms"], body["min_bytes"], body["max_bytes"]) == (100, 1, 10 << 20)
    assert (body["session_id"], body["session_epoch"], body["isolation_level"]) == (
        0,
        0,
        0,
    )  # a full fetch that opens a KIP-227 session
    [topic] = body["topics"]
    assert topic["topic_id"] == TOPIC_ID
    assert topic["partitions"] == [
        {
            "partition": 0,
            "current_leader_epoch": LEADER_EPOCH,
            "fetch_offset": 0,
            "last_fetched_epoch": -1,
            "log_start_offset": 0,
            "partition_max_bytes": 1 << 20,
        }
    ]


def test_high_watermark_is_capped_by_the_followers_log_end(h):
    st = h.add(state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=10, records=batches(0, [2]))
    h.fetcher.do_work()
    assert h.partition().log.high_watermark == 2
    assert st.lag == 8  # the leader's HW minus this replica's fetch offset


def test_leader_log_start_offset_moves_the_followers_up_to_its_high_watermark(h):
    h.add(state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=4, log_start=3, records=batches(0, [2, 3]))
    h.fetcher.do_work()
    assert h.partition().log.log_start_offset == 3
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=4, log_start=5)  # beyond the follower's HW: not taken
    h.fetcher.do_work()
    assert h.partition().log.log_start_offset == 3


def test_an_empty_answer_only_moves_the_high_watermark(h):
    follower_log(h, batches(0, [3]))
    st = h.add(fetch_offset=3, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=2)
    h.fetcher.do_work()
    p = h.partition()
    assert p.log.log_end_offset == 3 and p.log.high_watermark == 2 and st.fetch_offset == 3


def test_one_fetch_carries_every_ready_partition(h):
    h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=1, records=batches(0, [1]))
    h.fetcher.do_work()
    [body] = h.leader.sent(ApiKeys.FETCH)
    assert sorted(p["partition"] for p in body["topics"][0]["partitions"]) == [0, 1]
    assert h.partition(0).log.log_end_offset == h.partition(1).log.log_end_offset == 1


def test_requests_meter_is_marked_per_fetch(h):
    marks = []
    h.fetcher.requests_meter = type("Meter", (), {"mark": lambda self: marks.append(1)})()
    h.add(state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    h.fetcher.do_work()
    assert len(marks) == 2


def test_max_lag_is_the_largest_partition_lag(h):
    h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer({0: {"high_watermark": 7}, 1: {"high_watermark": 3}})
    h.fetcher.do_work()
    assert h.fetcher.max_lag() == 7


def test_no_fetch_before_this_broker_is_registered_but_truncation_goes_ahead(h):
    """KIP-903: a Fetch without a broker epoch could be counted under the previous incarnation."""
    follower_log(h, batches(0, [2, 2], epoch=-1))  # no epochs: truncation to the given offset, locally
    st = h.add(fetch_offset=2)
    h.rm.epoch = -1
    h.fetcher.do_work()
    assert h.leader.requests == [] and st.state == FETCHING and h.partition().log.log_end_offset == 2
    h.rm.epoch = BROKER_EPOCH
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert len(h.leader.sent(ApiKeys.FETCH)) == 1


# -- truncation (KIP-101 / KIP-279 / KIP-320) ------------------------------------------------------------


def test_replica_without_epochs_truncates_to_its_high_watermark_without_asking(h):
    follower_log(h, batches(0, [1, 1, 1, 1], epoch=-1))
    st = h.add(fetch_offset=3)  # the replica's high watermark when it became a follower
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert h.leader.sent(ApiKeys.OFFSET_FOR_LEADER_EPOCH) == []
    assert h.partition().log.log_end_offset == 3 and st.state == FETCHING and st.fetch_offset == 3
    assert h.leader.sent(ApiKeys.FETCH)[0]["topics"][0]["partitions"][0]["fetch_offset"] == 3


def test_truncates_to_the_leaders_end_of_its_latest_epoch(h):
    follower_log(h, batches(0, [3], epoch=1) + batches(3, [1, 1, 1], epoch=2))
    st = h.add()
    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = epoch_answer({0: (errors.NONE, 2, 4)})
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    [(key, version, body)] = h.leader.requests[:1]
    assert (key, version, body["replica_id"]) == (ApiKeys.OFFSET_FOR_LEADER_EPOCH, 4, 1)
    assert body["topics"] == [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": LEADER_EPOCH, "leader_epoch": 2}]}
    ]
    assert h.partition().log.log_end_offset == 4 and st.state == FETCHING and st.fetch_offset == 4
    assert h.partition().log.end_offset_for_epoch(2) == (4, 2)


def test_no_truncation_when_the_leader_has_more_of_the_epoch(h):
    follower_log(h, batches(0, [3], epoch=2))
    st = h.add()
    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = epoch_answer({0: (errors.NONE, 2, 10)})
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 3 and st.state == FETCHING and st.fetch_offset == 3


def test_leader_with_an_older_epoch_makes_the_follower_truncate_to_its_own_end_and_ask_again(h):
    """KIP-279: the leader's answer names an epoch this replica does not have (it had epochs 1 and 3, the
    leader 1 and 2): truncate to the end of our largest epoch below it and ask again with that one."""
    follower_log(h, batches(0, [1, 1, 1], epoch=1) + batches(3, [3], epoch=3))
    st = h.add()
    answers = iter([(errors.NONE, 2, 5), (errors.NONE, 1, 2)])
    asked: list[int] = []

    def handle(body):
        asked.append(body["topics"][0]["partitions"][0]["leader_epoch"])
        return epoch_answer({0: next(answers)})(body)

    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = handle
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert asked == [3] and st.state == TRUNCATING and h.partition().log.log_end_offset == 3
    h.fetcher.do_work()
    assert asked == [3, 1] and st.state == FETCHING
    assert h.partition().log.log_end_offset == 2 and h.partition().log.latest_epoch == 1


def test_undefined_epoch_end_offset_truncates_to_the_high_watermark(h):
    follower_log(h, batches(0, [1, 1, 1, 1], epoch=1))
    st = h.add(fetch_offset=1)
    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = epoch_answer({0: (errors.NONE, -1, -1)})
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 1 and st.state == FETCHING


def test_epoch_unknown_to_the_leader_truncates_to_its_end_offset(h):
    follower_log(h, batches(0, [2, 2], epoch=3))
    h.add()
    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = epoch_answer({0: (errors.NONE, -1, 2)})
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 2


@pytest.mark.parametrize(
    "code", [errors.FENCED_LEADER_EPOCH, errors.NOT_LEADER_OR_FOLLOWER, errors.UNKNOWN_LEADER_EPOCH]
)
def test_offset_for_leader_epoch_error_backs_the_partition_off(h, code):
    follower_log(h, batches(0, [2], epoch=1))
    st = h.add()
    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = epoch_answer({0: (code, -1, -1)})
    h.fetcher._maybe_truncate()
    assert st.state == TRUNCATING and st.delay_until_ms == h.time.milliseconds() + BACKOFF_MS
    assert h.partition().log.log_end_offset == 2  # nothing truncated on an error
    h.fetcher._maybe_truncate()
    assert len(h.leader.sent(ApiKeys.OFFSET_FOR_LEADER_EPOCH)) == 1  # not asked again during the back-off
    h.time.sleep(BACKOFF_MS)
    h.fetcher._maybe_truncate()
    assert len(h.leader.sent(ApiKeys.OFFSET_FOR_LEADER_EPOCH)) == 2


def test_diverging_epoch_in_a_fetch_answer_sends_the_partition_back_to_truncation(h):
    """KIP-320: the leader reports where this replica's log diverges; nothing of that answer is appended and
    the partition truncates (through OffsetForLeaderEpoch, as this fetcher does) before fetching again."""
    follower_log(h, batches(0, [3], epoch=1) + batches(3, [2], epoch=2))
    st = h.add(state=FETCHING, fetch_offset=5)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(
        {0: {"diverging_epoch": {"epoch": 1, "end_offset": 3}}}, hw=3, records=batches(5, [1], epoch=3)
    )
    h.fetcher.do_work()
    assert st.state == TRUNCATING and h.partition().log.log_end_offset == 5
    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = epoch_answer({0: (errors.NONE, 1, 3)})
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=4, records=batches(3, [1], epoch=3))
    h.fetcher.do_work()
    asked = h.leader.sent(ApiKeys.OFFSET_FOR_LEADER_EPOCH)
    assert asked[0]["topics"][0]["partitions"][0]["leader_epoch"] == 2
    p = h.partition()
    assert p.log.end_offset_for_epoch(1) == (3, 1) and p.log.log_end_offset == 4 and p.log.latest_epoch == 3


def test_diverging_epoch_absent_fields_mean_no_divergence(h):
    st = h.add(state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(
        {0: {"diverging_epoch": {"epoch": -1, "end_offset": -1}}}, hw=1, records=batches(0, [1])
    )
    h.fetcher.do_work()
    assert st.state == FETCHING and h.partition().log.log_end_offset == 1


# -- OFFSET_OUT_OF_RANGE (Kafka's fetchOffsetAndTruncate) --------------------------------------------------


def test_out_of_range_behind_the_leaders_start_truncates_fully_and_starts_there(h):
    follower_log(h, batches(0, [3]))
    st = h.add(state=FETCHING, fetch_offset=3)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer({0: {"error_code": errors.OFFSET_OUT_OF_RANGE}})
    h.leader.handlers[ApiKeys.LIST_OFFSETS] = list_offsets_answer(earliest=50, latest=80)
    h.fetcher.do_work()
    p = h.partition()
    assert p.log.log_start_offset == p.log.log_end_offset == 50 and st.fetch_offset == 50
    asked = h.leader.sent(ApiKeys.LIST_OFFSETS)
    assert [b["topics"][0]["partitions"][0]["timestamp"] for b in asked] == [-1, -2]
    assert asked[0]["replica_id"] == 1
    assert asked[0]["topics"][0]["partitions"][0]["current_leader_epoch"] == LEADER_EPOCH
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=52, log_start=50, records=batches(50, [2]))
    h.fetcher.do_work()
    assert h.leader.sent(ApiKeys.FETCH)[-1]["topics"][0]["partitions"][0]["fetch_offset"] == 50
    assert p.log.log_end_offset == 52 and p.log.high_watermark == 52


def test_out_of_range_past_the_leaders_end_truncates_to_it(h):
    """After an unclean election the new leader's log may be shorter than this replica's."""
    follower_log(h, batches(0, [2, 2, 2]))
    st = h.add(state=FETCHING, fetch_offset=6)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer({0: {"error_code": errors.OFFSET_OUT_OF_RANGE}})
    h.leader.handlers[ApiKeys.LIST_OFFSETS] = list_offsets_answer(earliest=0, latest=4)
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 4 and st.fetch_offset == 4 and st.state == FETCHING


def test_out_of_range_within_the_leaders_log_keeps_the_followers_log(h):
    follower_log(h, batches(0, [2, 2]))
    st = h.add(state=FETCHING, fetch_offset=4)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer({0: {"error_code": errors.OFFSET_OUT_OF_RANGE}})
    h.leader.handlers[ApiKeys.LIST_OFFSETS] = list_offsets_answer(earliest=2, latest=10)
    h.fetcher.do_work()
    p = h.partition()
    assert p.log.log_end_offset == 4 and p.log.log_start_offset == 0 and st.fetch_offset == 4


def test_out_of_range_with_a_failing_list_offsets_backs_off_without_truncating(h):
    follower_log(h, batches(0, [2]))
    st = h.add(state=FETCHING, fetch_offset=2)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer({0: {"error_code": errors.OFFSET_OUT_OF_RANGE}})
    h.leader.handlers[ApiKeys.LIST_OFFSETS] = list_offsets_answer(50, 80, errors.NOT_LEADER_OR_FOLLOWER)
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 2
    assert st.delay_until_ms == h.time.milliseconds() + BACKOFF_MS and st.state == FETCHING


# -- partition errors and back-off -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        errors.NOT_LEADER_OR_FOLLOWER,
        errors.FENCED_LEADER_EPOCH,
        errors.UNKNOWN_LEADER_EPOCH,
        errors.UNKNOWN_TOPIC_ID,
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        errors.KAFKA_STORAGE_ERROR,
    ],
)
def test_partition_error_delays_only_that_partition_until_the_back_off_ends(h, code):
    """Kafka retries these after replica.fetch.backoff.ms (the metadata log moves the partition meanwhile);
    the partition stays in the fetcher and the others go on."""
    bad, good = h.add(0, state=FETCHING), h.add(1, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer({0: {"error_code": code}}, hw=1, records=batches(0, [1]))
    h.fetcher.do_work()
    now = h.time.milliseconds()
    assert bad.delay_until_ms == now + BACKOFF_MS and bad.state == FETCHING
    assert h.partition(0).log.log_end_offset == 0 and h.partition(1).log.log_end_offset == 1
    assert good.delay_until_ms == 0
    h.fetcher.do_work()
    assert [p["partition"] for p in h.leader.sent(ApiKeys.FETCH)[-1]["topics"][0]["partitions"]] == [1]
    h.time.sleep(BACKOFF_MS)
    h.fetcher.do_work()
    assert sorted(p["partition"] for p in h.leader.sent(ApiKeys.FETCH)[-1]["topics"][0]["partitions"]) == [0, 1]
    assert (TOPIC, 0) in h.fetcher.partitions


def test_top_level_fetch_error_backs_every_partition_off(h):
    a, b = h.add(0, state=FETCHING), h.add(1, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = lambda body: {"error_code": errors.UNKNOWN_SERVER_ERROR, "responses": []}
    h.fetcher.do_work()
    assert a.delay_until_ms == b.delay_until_ms == h.time.milliseconds() + BACKOFF_MS


def test_connection_error_backs_every_partition_off_and_reconnects(h):
    st = h.add(state=FETCHING)

    def refuse(body):
        raise ConnectionResetError("leader went away")

    h.leader.handlers[ApiKeys.FETCH] = refuse
    h.fetcher.do_work()
    assert st.delay_until_ms == h.time.milliseconds() + BACKOFF_MS
    assert len(h.leader.connections) == 1 and h.leader.connections[0].closed
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=1, records=batches(0, [1]))
    h.time.sleep(BACKOFF_MS)
    h.fetcher.do_work()
    assert len(h.leader.connections) == 2 and h.partition().log.log_end_offset == 1


def test_storage_error_on_append_takes_the_partition_out_of_the_fetcher(h, monkeypatch):
    """Kafka marks the partition failed: its log directory is offline."""
    h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)

    def offline(*args, **kwargs):
        raise errors.KafkaStorageError("disk gone")

    monkeypatch.setattr(h.partition(0), "append_records_as_follower", offline)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=1, records=batches(0, [1]))
    h.fetcher.do_work()
    assert (TOPIC, 0) not in h.fetcher.partitions and (TOPIC, 1) in h.fetcher.partitions
    assert h.partition(1).log.log_end_offset == 1


def test_unexpected_append_offset_truncates_again_after_the_back_off(h):
    """Batches below this replica's log end (the leader answered for an older fetch offset): truncate."""
    follower_log(h, batches(0, [4], epoch=1))
    st = h.add(state=FETCHING, fetch_offset=4)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer(hw=4, records=batches(2, [2], epoch=1))
    h.fetcher.do_work()
    assert st.state == TRUNCATING and st.delay_until_ms == h.time.milliseconds() + BACKOFF_MS
    assert h.partition().log.log_end_offset == 4


def test_an_error_in_the_loop_backs_off_and_the_loop_goes_on(real_h):
    """A malformed answer raises inside do_work: run() logs it, closes the connection and backs off."""
    st = real_h.add(state=FETCHING)
    answers = iter([{"error_code": errors.NONE}, None])  # no "responses": KeyError
    sent_at: list[float] = []

    def handle(body):
        sent_at.append(_time.monotonic())
        answer = next(answers)
        if answer is None:
            real_h.fetcher.initiate_shutdown()
            return fetch_answer()(body)
        return answer

    real_h.leader.handlers[ApiKeys.FETCH] = handle
    real_h.fetcher.start()
    real_h.fetcher.join(10)
    assert not real_h.fetcher.is_alive()
    assert len(real_h.leader.sent(ApiKeys.FETCH)) == 2 and len(real_h.leader.connections) == 2
    assert st.delay_until_ms > 0 and sent_at[1] - sent_at[0] >= BACKOFF_MS / 1000 * 0.9


# -- partitions added and removed ------------------------------------------------------------------------


def test_answer_for_a_partition_removed_meanwhile_is_not_applied(h):
    """Once remove_partitions returns, nothing more is appended for them (the ReplicaManager relies on it)."""
    h.add(state=FETCHING)
    answer = fetch_answer(hw=1, records=batches(0, [1]))

    def handle(body):
        h.fetcher.remove_partitions([(TOPIC, 0)])
        return answer(body)

    h.leader.handlers[ApiKeys.FETCH] = handle
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 0 and h.fetcher.partition_count() == 0


def test_answer_for_a_partition_re_added_meanwhile_is_not_applied(h):
    """A new leader epoch replaces the partition's state while a fetch is in flight: the answer belongs to
    the old state and is dropped; the new state starts with its truncation."""
    h.add(state=FETCHING)
    answer = fetch_answer(hw=1, records=batches(0, [1]))
    replaced: list[PartitionFetchState] = []

    def handle(body):
        replaced.append(h.add(state=TRUNCATING))
        return answer(body)

    h.leader.handlers[ApiKeys.FETCH] = handle
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 0
    assert h.fetcher.partitions[(TOPIC, 0)] is replaced[0] and replaced[0].state == TRUNCATING


def test_epoch_answer_for_a_partition_removed_meanwhile_is_not_applied(h):
    follower_log(h, batches(0, [4], epoch=1))
    h.add()
    answer = epoch_answer({0: (errors.NONE, 1, 1)})

    def handle(body):
        h.fetcher.remove_all_partitions()
        return answer(body)

    h.leader.handlers[ApiKeys.OFFSET_FOR_LEADER_EPOCH] = handle
    h.fetcher.do_work()
    assert h.partition().log.log_end_offset == 4


def test_partition_gone_from_the_replica_manager_is_skipped(h):
    h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)
    del h.rm.partitions[(TOPIC, 0)]
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()
    h.fetcher.do_work()
    assert [p["partition"] for p in h.leader.sent(ApiKeys.FETCH)[0]["topics"][0]["partitions"]] == [1]


def test_remove_all_partitions_hands_their_states_back(h):
    a, b = h.add(0), h.add(1, state=FETCHING)
    assert h.fetcher.remove_all_partitions() == {(TOPIC, 0): a, (TOPIC, 1): b}
    assert h.fetcher.partition_count() == 0 and h.fetcher.max_lag() == 0


# -- the running thread -----------------------------------------------------------------------------------


def test_partition_added_to_a_running_thread_is_fetched_at_once(h):
    """An idle thread sleeps up to replica.fetch.backoff.ms; add_partitions wakes it."""
    h.fetcher.backoff_ms = 60_000  # an idle wait the test would notice
    fetched = threading.Event()
    answer = fetch_answer(hw=1, records=batches(0, [1]))

    def handle(body):
        fetched.set()
        return answer(body)

    h.leader.handlers[ApiKeys.FETCH] = handle
    h.fetcher.start()
    wait_until(lambda: h.fetcher.is_alive(), 5)
    _time.sleep(0.1)  # the thread is idle in its wait now
    h.add(state=FETCHING)
    assert fetched.wait(5)
    wait_until(lambda: h.partition().log.log_end_offset == 1, 5, message="the batch appended")


def test_shutdown_interrupts_a_fetch_waiting_on_the_leader(h):
    h.leader.blocking = True  # the leader never answers
    h.add(state=FETCHING)
    h.fetcher.start()
    assert h.leader.blocked.wait(5)
    started = _time.monotonic()
    h.fetcher.shutdown(timeout_s=5)
    assert not h.fetcher.is_alive() and _time.monotonic() - started < 2
    assert all(c.closed for c in h.leader.connections)
    assert h.fetcher._interrupt_handle is None


def test_reset_connection_abandons_the_request_and_reconnects_without_back_off(h):
    h.leader.blocking = True
    st = h.add(state=FETCHING)
    h.fetcher.start()
    assert h.leader.blocked.wait(5)
    h.leader.blocked.clear()
    h.fetcher.reset_connection("the leader re-registered")
    assert h.leader.blocked.wait(5)  # the same fetch, sent again on a new connection
    assert len(h.leader.connections) == 2 and h.leader.connections[0].closed
    assert st.delay_until_ms == 0  # no back-off after a reset
    h.fetcher.shutdown(timeout_s=5)
    assert not h.fetcher.is_alive()


def test_shutdown_of_a_thread_never_started_returns_at_once(h):
    h.fetcher.shutdown(timeout_s=5)
    assert not h.fetcher.is_alive() and not h.fetcher._running


# -- KIP-227 fetch session with the leader ---------------------------------------------------------------------


class SessionLeader:
    """A Fetch handler with a leader's session semantics: epoch 0 opens session ``SESSION`` over the partitions
    listed (closing any named), later epochs must match; an incremental answer carries only partitions whose
    records (``records[index]``, answered once) or ``hw`` changed since the session last answered them."""

    SESSION = 77

    def __init__(self, partitions: int):
        self.hw = dict.fromkeys(range(partitions), 0)
        self.records: dict[int, bytes] = {}
        self.session: dict[int, int] | None = None  # partition -> fetch offset
        self.epoch = 0
        self.answered_hw: dict[int, int] = {}
        self.error: int | None = None

    def _answer(self, index: int) -> dict:
        self.answered_hw[index] = self.hw[index]
        return {
            "partition_index": index,
            "error_code": errors.NONE,
            "high_watermark": self.hw[index],
            "log_start_offset": 0,
            "records": self.records.pop(index, None),
        }

    def __call__(self, body: dict) -> dict:
        if self.error is not None:
            code, self.error = self.error, None
            return {"error_code": code, "session_id": 0, "responses": []}
        listed = {p["partition"]: p["fetch_offset"] for t in body["topics"] for p in t["partitions"]}
        if body["session_epoch"] == 0:
            self.session, self.epoch, self.answered_hw = dict(listed), 1, {}
            ps = [self._answer(i) for i in sorted(listed)]
        else:
            assert self.session is not None and body["session_id"] == self.SESSION
            assert body["session_epoch"] == self.epoch
            self.epoch += 1
            self.session.update(listed)
            for t in body["forgotten_topics_data"]:
                for i in t["partitions"]:
                    del self.session[i]
            ps = [
                self._answer(i)
                for i in sorted(self.session)
                if i in self.records or self.answered_hw.get(i) != self.hw[i]
            ]
        return {
            "error_code": errors.NONE,
            "session_id": self.SESSION,
            "responses": [{"topic_id": TOPIC_ID, "partitions": ps}] if ps else [],
        }


def listed(body: dict) -> dict[int, int]:
    return {p["partition"]: p["fetch_offset"] for t in body["topics"] for p in t["partitions"]}


def test_incremental_fetches_list_only_partitions_whose_fetch_offset_changed(h):
    for i in range(3):
        h.add(i, state=FETCHING)
    leader = h.leader.handlers[ApiKeys.FETCH] = SessionLeader(3)
    leader.records[1] = batches(0, [2])
    h.fetcher.do_work()  # full: opens the session
    h.fetcher.do_work()  # partition 1 moved to offset 2
    h.fetcher.do_work()  # idle: nothing to list, nothing answered
    full, moved, idle = h.leader.sent(ApiKeys.FETCH)
    assert (full["session_id"], full["session_epoch"], listed(full)) == (0, 0, {0: 0, 1: 0, 2: 0})
    assert (moved["session_id"], moved["session_epoch"], listed(moved)) == (SessionLeader.SESSION, 1, {1: 2})
    assert (idle["session_id"], idle["session_epoch"], idle["topics"]) == (SessionLeader.SESSION, 2, [])
    assert moved["forgotten_topics_data"] == idle["forgotten_topics_data"] == []
    assert h.partition(1).log.log_end_offset == 2


def test_a_high_watermark_in_an_incremental_answer_reaches_the_follower(h):
    h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)
    leader = h.leader.handlers[ApiKeys.FETCH] = SessionLeader(2)
    leader.records = {0: batches(0, [3]), 1: batches(0, [3])}
    h.fetcher.do_work()
    leader.hw[1] = 3  # only partition 1's HW moved on the leader
    h.fetcher.do_work()
    assert h.partition(1).log.high_watermark == 3 and h.partition(0).log.high_watermark == 0


def test_a_partition_leaving_the_fetcher_is_forgotten_in_the_session(h):
    h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = SessionLeader(2)
    h.fetcher.do_work()
    h.fetcher.remove_partitions([(TOPIC, 1)])
    h.fetcher.do_work()
    last = h.leader.sent(ApiKeys.FETCH)[-1]
    assert last["topics"] == [] and last["forgotten_topics_data"] == [{"topic_id": TOPIC_ID, "partitions": [1]}]


@pytest.mark.parametrize(
    ("code", "next_session_id"),
    [(errors.FETCH_SESSION_ID_NOT_FOUND, 0), (errors.INVALID_FETCH_SESSION_EPOCH, SessionLeader.SESSION)],
)
def test_a_session_error_makes_the_next_fetch_a_full_one_without_back_off(h, code, next_session_id):
    """Kafka's FetchSessionHandler: an unknown session is forgotten; a bad epoch closes it with the next full
    fetch (epoch 0 naming it), which opens a new one."""
    st = h.add(0, state=FETCHING)
    h.add(1, state=FETCHING)
    leader = h.leader.handlers[ApiKeys.FETCH] = SessionLeader(2)
    h.fetcher.do_work()
    leader.error = code
    h.fetcher.do_work()
    assert st.delay_until_ms == 0
    leader.records[0] = batches(0, [1])
    h.fetcher.do_work()
    retry = h.leader.sent(ApiKeys.FETCH)[-1]
    assert (retry["session_id"], retry["session_epoch"], listed(retry)) == (next_session_id, 0, {0: 0, 1: 0})
    assert h.partition(0).log.log_end_offset == 1


def test_a_lost_fetch_makes_the_next_one_a_full_fetch_closing_the_session(h):
    """The leader may or may not have advanced the session's epoch: start over."""
    h.add(0, state=FETCHING)
    leader = SessionLeader(1)
    h.leader.handlers[ApiKeys.FETCH] = leader
    h.fetcher.do_work()

    def lost(body):
        raise ConnectionResetError("leader went away")

    h.leader.handlers[ApiKeys.FETCH] = lost
    h.fetcher.do_work()
    h.leader.handlers[ApiKeys.FETCH] = leader
    h.time.sleep(BACKOFF_MS)
    h.fetcher.do_work()
    retry = h.leader.sent(ApiKeys.FETCH)[-1]
    assert (retry["session_id"], retry["session_epoch"], listed(retry)) == (SessionLeader.SESSION, 0, {0: 0})


def test_without_a_session_from_the_leader_every_fetch_is_full(h):
    h.add(0, state=FETCHING)
    h.leader.handlers[ApiKeys.FETCH] = fetch_answer()  # answers with no session id
    h.fetcher.do_work()
    h.fetcher.do_work()
    assert [(b["session_id"], b["session_epoch"], listed(b)) for b in h.leader.sent(ApiKeys.FETCH)] == [
        (0, 0, {0: 0})
    ] * 2


def test_an_idle_round_builds_its_request_without_looking_at_any_partition(h, monkeypatch):
    """Issue 31: once the session is open, a request is built from the partitions applied from the last answer
    only; every partition is looked at again after FULL_REBUILD_MS (a log start offset moved by the follower's
    retention then reaches the leader) or when the fetcher's partitions change."""
    from pykbroker.server.replica_fetcher_thread import FULL_REBUILD_MS

    for i in range(3):
        h.add(i, state=FETCHING)
    leader = h.leader.handlers[ApiKeys.FETCH] = SessionLeader(3)
    leader.records[1] = batches(0, [2])
    looked_at: list[tuple[str, int]] = []
    get_partition = h.rm.get_partition
    monkeypatch.setattr(h.rm, "get_partition", lambda *tp: looked_at.append(tp) or get_partition(*tp))
    h.fetcher.do_work()  # full: opens the session (every partition answered), partition 1 gets its records
    assert sorted(looked_at) == sorted([(TOPIC, i) for i in range(3)] * 2)  # built, then applied
    looked_at.clear()
    h.fetcher.do_work()  # only the partitions applied from the answer are rebuilt; partition 1 moved to offset 2
    assert looked_at == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    looked_at.clear()
    for _ in range(3):
        h.fetcher.do_work()  # idle
    assert looked_at == []
    assert [listed(b) for b in h.leader.sent(ApiKeys.FETCH)[1:]] == [{1: 2}, {}, {}, {}]
    h.partition(1).log.update_high_watermark(2)
    h.partition(1).log.maybe_increment_log_start_offset(1, "retention")
    h.time.sleep(FULL_REBUILD_MS)
    h.fetcher.do_work()
    assert sorted(looked_at) == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    last = h.leader.sent(ApiKeys.FETCH)[-1]
    assert [p["log_start_offset"] for t in last["topics"] for p in t["partitions"]] == [1]
    looked_at.clear()
    h.add(3, state=FETCHING)
    leader.hw[3] = 0
    h.fetcher.do_work()  # a new partition: every partition is looked at, the new one listed
    assert sorted(looked_at) == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2), (TOPIC, 3), (TOPIC, 3)]  # built, 3 applied
    assert listed(h.leader.sent(ApiKeys.FETCH)[-1]) == {3: 0}


class BrokerProperties(dict):
    """The broker config as the fetcher sees it: every value (defaults included), and ``originals``, the keys the
    broker's properties set (as KafkaConfig)."""

    def __init__(self, values: dict, originals: dict):
        super().__init__(values)
        self.originals = originals


def _receive_buffer(h: Harness) -> int:
    h.fetcher._connection()
    return h.leader.connections[-1].ours.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def test_replica_socket_receive_buffer_bytes_set_explicitly_is_the_connection_s_so_rcvbuf(tmp_path):
    """Kafka applies replica.socket.receive.buffer.bytes as SO_RCVBUF of the follower's connection (before the
    connect); set explicitly it is applied (Linux reports twice the value set)."""
    config = {**CONFIG, "replica.socket.receive.buffer.bytes": 32768}
    h = Harness(tmp_path, config=BrokerProperties(config, {"replica.socket.receive.buffer.bytes": 32768}))
    try:
        assert _receive_buffer(h) == 2 * 32768
    finally:
        h.close()


@pytest.mark.parametrize("value", [65536, -1])
def test_replica_socket_receive_buffer_bytes_default_or_minus_one_keeps_the_os_buffer(tmp_path, value):
    """Left at its default (not in the broker's properties) or -1, the OS's auto-tuned buffer is kept (issue 31: a
    fixed 64 KB window costs a wake-up per 32 KB of each fetch answer)."""
    a, b = socket.socketpair()
    with a, b:
        default = a.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert default != 2 * 65536  # else this test could not tell
    config = {**CONFIG, "replica.socket.receive.buffer.bytes": value}
    originals = {} if value == 65536 else {"replica.socket.receive.buffer.bytes": value}
    h = Harness(tmp_path, config=BrokerProperties(config, originals))
    try:
        assert _receive_buffer(h) == default
    finally:
        h.close()
