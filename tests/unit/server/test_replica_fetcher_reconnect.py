"""A follower's fetcher never waits out a request lost with a dead connection once the metadata says so
(ReplicaFetcherThread.reset_connection / ReplicaFetcherManager.on_broker_changes, driven through the
BrokerMetadataPublisher of an in-process broker, node 1).

The leaders are SilentLeaders: real listening sockets that accept and read requests but never answer,
as a leader behind a network partition (or stopped) looks to a blocking fetcher. replica.socket.timeout.ms
is Kafka's 30 s default, so a fetcher only reconnects within the tests' few seconds when told to.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.records import ApiMessageAndVersion, partition_record, topic_record
from pykbroker.server.broker_metadata_publisher import BrokerMetadataPublisher
from tests.helpers.wait import wait_until
from tests.unit.server.apis_harness import LocalBroker

TOPIC_ID = uuid.UUID(int=42)


class SilentLeader:
    """Accepts connections and reads what arrives; never answers. ``connections[i]`` is
    ``[bytes received, closed by the other side]``."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[list] = []
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            state = [0, False]
            self.connections.append(state)
            self._socks.append(sock)
            threading.Thread(target=self._read, args=(sock, state), daemon=True).start()

    @staticmethod
    def _read(sock: socket.socket, state: list) -> None:
        while True:
            try:
                data = sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                state[1] = True
                return
            state[0] += len(data)

    def waiting_request(self, i: int) -> bool:
        """Connection ``i`` carries a request and is still open."""
        return len(self.connections) > i and self.connections[i][0] > 0 and not self.connections[i][1]

    def closed(self, i: int) -> bool:
        return self.connections[i][1]

    def close(self) -> None:
        self.server.close()
        for s in self._socks:
            s.close()


def register(broker_id: int, port: int, epoch: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion(
        "RegisterBrokerRecord",
        3,
        {
            "broker_id": broker_id,
            "is_migrating_zk_broker": False,
            "incarnation_id": uuid.UUID(int=100 + epoch),
            "broker_epoch": epoch,
            "end_points": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": port, "security_protocol": 0}],
            "features": [],
            "rack": None,
            "fenced": False,
            "in_controlled_shutdown": False,
            "log_dirs": [],
        },
    )


def fence(broker_id: int, epoch: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion("FenceBrokerRecord", 0, {"id": broker_id, "epoch": epoch})


def unfence(broker_id: int, epoch: int) -> ApiMessageAndVersion:
    return ApiMessageAndVersion("UnfenceBrokerRecord", 0, {"id": broker_id, "epoch": epoch})


class Follower:
    """Node 1 of a cluster, fed metadata records through its BrokerMetadataPublisher."""

    def __init__(self, tmp_path):
        self.broker = LocalBroker(tmp_path / "logs")
        self.rm = self.broker.replica_manager
        self.rm.broker_epoch = lambda: 1  # node 1's registration in LocalBroker's image
        self.publisher = BrokerMetadataPublisher(1, self.broker.cache, self.rm, self.broker.log_manager)

    def publish(self, *records: ApiMessageAndVersion) -> None:
        delta = MetadataDelta(self.broker.cache.image)
        for r in records:
            delta.replay(r)
        self.publisher.on_metadata_update(delta, delta.apply())

    def close(self) -> None:
        self.broker.close()


@pytest.fixture
def follower(tmp_path):
    f = Follower(tmp_path)
    yield f
    f.close()


@pytest.fixture
def leaders():
    made: list[SilentLeader] = []

    def make() -> SilentLeader:
        made.append(SilentLeader())
        return made[-1]

    yield make
    for leader in made:
        leader.close()


def _follow_from(follower: Follower, leader: SilentLeader, leader_id: int = 2, epoch: int = 7) -> None:
    follower.publish(
        register(leader_id, leader.port, epoch),
        topic_record("t", TOPIC_ID),
        partition_record(TOPIC_ID, 0, [leader_id, 1], [leader_id, 1], leader_id, leader_epoch=1),
    )
    wait_until(lambda: leader.waiting_request(0), 5, message="a Fetch in flight to the leader")


def _reconnected(leader: SilentLeader) -> bool:
    return leader.closed(0) and leader.waiting_request(1)


def test_leader_unfenced_after_fencing_makes_its_fetchers_reconnect(follower, leaders):
    leader = leaders()
    _follow_from(follower, leader)
    follower.publish(fence(2, 7))  # fenced (a fenced leader leads nothing in a real cluster: keep it simple)
    assert leader.waiting_request(0) and len(leader.connections) == 1  # nothing to do while it is away
    follower.publish(unfence(2, 7))
    wait_until(lambda: _reconnected(leader), 3, message="the old request abandoned, a new connection")


def test_leader_fenced_and_unfenced_within_one_delta_counts_as_back(follower, leaders):
    leader = leaders()
    _follow_from(follower, leader)
    follower.publish(fence(2, 7), unfence(2, 7))
    wait_until(lambda: _reconnected(leader), 3, message="the old request abandoned, a new connection")


def test_leader_re_registered_at_a_new_endpoint_is_fetched_from_there(follower, leaders):
    old, new = leaders(), leaders()
    _follow_from(follower, old)
    follower.publish(register(2, new.port, 8))  # a restart: new epoch, new port, same partitions and epochs
    wait_until(lambda: old.closed(0) and new.waiting_request(0), 3, message="fetching from the new endpoint")
    assert follower.rm.replica_fetcher_manager.fetcher_count() == 1


def test_partitions_moving_to_a_new_leader_close_the_idle_thread_at_once(follower, leaders):
    """Kafka's applyDelta shuts idle fetcher threads down at its end: the request in flight to the old
    leader is abandoned now, not at the next 10 s clean-up."""
    old, new = leaders(), leaders()
    _follow_from(follower, old)
    follower.publish(
        register(3, new.port, 9),
        partition_record(TOPIC_ID, 0, [2, 1, 3], [1, 3], 3, leader_epoch=2),
    )
    wait_until(lambda: new.waiting_request(0), 3, message="fetching from the new leader")
    wait_until(lambda: old.closed(0), 3, message="the old leader's connection closed")
    assert follower.rm.replica_fetcher_manager.fetcher_count() == 1


def test_this_broker_back_after_losing_its_session_reconnects_every_fetcher(follower, leaders):
    leader = leaders()
    follower.publish(unfence(1, 1))  # this broker's registration, unfenced (as at its start-up)
    _follow_from(follower, leader)
    follower.publish(fence(1, 1))  # this broker was cut off long enough to be fenced...
    follower.publish(unfence(1, 1))  # ... and is back
    wait_until(lambda: _reconnected(leader), 3, message="the old request abandoned, a new connection")


def test_unrelated_registration_changes_leave_the_connection_alone(follower, leaders):
    leader, other = leaders(), leaders()
    _follow_from(follower, leader)
    follower.publish(register(3, other.port, 9))  # another broker joins
    follower.publish(fence(3, 9), unfence(3, 9))
    follower.publish(unfence(1, 1))  # this broker's first unfencing (no session lost before it)
    # A reset shuts the socket down within the publish call: the leader would see it at once.
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        assert leader.waiting_request(0) and len(leader.connections) == 1
        time.sleep(0.02)


def test_an_unregistered_broker_waits_for_its_epoch_then_fetches(follower, leaders, caplog):
    """Before this broker has a broker epoch (KIP-903) its fetcher sends no Fetch, waits quietly (no error in
    the fetcher loop) and fetches as soon as the epoch is there; a shutdown meanwhile ends the wait at once."""
    leader = leaders()
    epoch = [-1]
    follower.rm.broker_epoch = lambda: epoch[0]
    follower.publish(
        register(2, leader.port, 7),
        topic_record("t", TOPIC_ID),
        partition_record(TOPIC_ID, 0, [2, 1], [2, 1], 2, leader_epoch=1),
    )
    time.sleep(0.3)  # several replica.fetch.backoff.ms rounds: nothing may be sent meanwhile
    assert not leader.waiting_request(0)
    assert not [r for r in caplog.records if "Error in fetcher loop" in r.getMessage()]
    epoch[0] = 1
    wait_until(lambda: leader.waiting_request(0), 5, message="a Fetch once the broker has its epoch")
    assert not [r for r in caplog.records if "Error in fetcher loop" in r.getMessage()]
