"""Fetch from the closest replica (KIP-392): Kafka's RackAwareReplicaSelector (ReplicaSelectorTest cases),
``replica.selector.class`` validation, the leader's preferred read replica
(``ReplicaManager.findPreferredReadReplica``) and a follower serving consumer fetches up to its high
watermark with leader-epoch fencing (``Partition.fetchRecords`` with ``fetchOnlyLeader`` false), in process
(LocalBroker: LogManager on tmp_path, MockTime)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from pykbroker.config.config_def import ConfigException
from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF
from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.metadata.image import BrokerRegistration, Endpoint
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.server.replica_manager import FetchParams, PartitionFetch
from pykbroker.server.replica_selector import (
    RACK_AWARE_REPLICA_SELECTOR,
    ClientMetadata,
    PartitionView,
    RackAwareReplicaSelector,
    ReplicaView,
    create_replica_selector,
)
from tests.unit.server.apis_harness import LocalBroker, records

# -- RackAwareReplicaSelector ------------------------------------------------------------------------------

LEADER = ReplicaView(1, "a", 10, 0)


def select(rack: str, *followers: ReplicaView) -> ReplicaView | None:
    view = PartitionView((LEADER, *followers), LEADER)
    return RackAwareReplicaSelector().select("t", 0, ClientMetadata(rack), view)


def test_selector_picks_the_replica_in_the_clients_rack():
    b = ReplicaView(2, "b", 10, 5)
    assert select("b", b, ReplicaView(3, "c", 10, 0)) == b


def test_selector_prefers_the_leader_when_it_is_in_the_clients_rack():
    assert select("a", ReplicaView(2, "a", 10, 0)) == LEADER


def test_selector_answers_the_leader_without_a_rack_or_a_replica_in_it():
    assert select("", ReplicaView(2, "b", 10, 0)) == LEADER
    assert select("z", ReplicaView(2, "b", 10, 0)) == LEADER


def test_selector_picks_the_most_caught_up_replica_of_the_rack():
    behind, fresh, stale = ReplicaView(2, "b", 8, 0), ReplicaView(3, "b", 10, 100), ReplicaView(4, "b", 10, 900)
    assert select("b", behind, fresh, stale) == fresh  # highest LEO, then least time since caught up
    tie_low, tie_high = ReplicaView(5, "b", 10, 100), ReplicaView(6, "b", 10, 100)
    assert select("b", tie_low, tie_high) == tie_high  # then the highest id


# -- replica.selector.class ---------------------------------------------------------------------------------


def test_replica_selector_class_defaults_to_none_and_accepts_kafkas_rack_aware_selector():
    assert BROKER_CONFIG_DEF.parse({})["replica.selector.class"] is None
    assert create_replica_selector(None) is None
    parsed = BROKER_CONFIG_DEF.parse({"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    assert isinstance(create_replica_selector(parsed["replica.selector.class"]), RackAwareReplicaSelector)


def test_unknown_replica_selector_class_is_a_config_exception():
    with pytest.raises(ConfigException, match="replica.selector.class"):
        BROKER_CONFIG_DEF.parse({"replica.selector.class": "com.example.NearestSelector"})


# -- the leader's preferred read replica ---------------------------------------------------------------------


def _broker(node_id: int, rack: str, fenced: bool = False) -> BrokerRegistration:
    return BrokerRegistration(
        id=node_id,
        epoch=1,
        incarnation_id=uuid.UUID(int=node_id),
        listeners={"PLAINTEXT": Endpoint("PLAINTEXT", "127.0.0.1", 9090 + node_id, 0)},
        rack=rack,
        fenced=fenced,
    )


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    image = b.cache.image
    brokers = {1: _broker(1, "a"), 2: _broker(2, "b"), 3: _broker(3, "c")}
    b.cache.set_image(dataclasses.replace(image, brokers=brokers))
    b.replica_manager.replica_selector = RackAwareReplicaSelector()
    yield b
    b.close()


def fetch(rm, offset: int, rack: str | None, max_wait_ms: int = 0, epoch: int = -1, isolation=None) -> list:
    """A consumer fetch of t-0 at ``offset``; ``rack`` None: a Fetch before v11 (no client metadata)."""
    client = None if rack is None else ClientMetadata(rack, "c", "127.0.0.1", "User:ANONYMOUS", "PLAINTEXT")
    params = FetchParams(-1, max_wait_ms, 1, 1 << 20, isolation or FetchIsolation.HIGH_WATERMARK, -1, client)
    out: list = []
    rm.fetch_messages(params, [PartitionFetch("t", 0, offset, 1 << 20, epoch)], out.append)
    return [r for _, r in out[0]] if out else []


def _leader_with_followers(broker, follower_offsets: dict[int, int]) -> None:
    """t-0 led here (node 1, rack a) with replicas 1, 2 (b), 3 (c) all in the ISR, 5 records, and the
    followers' fetch offsets as the leader last saw them."""
    broker.add_topic("t", 1, replicas=(1, 2, 3))
    rm = broker.replica_manager
    rm.append_records(1000, 1, False, {("t", 0): records(5)}, lambda r: None)
    partition = rm.get_partition("t", 0)
    for follower, offset in follower_offsets.items():
        partition.update_follower_fetch_state(follower, offset, 0, broker.time.milliseconds(), 5)


def test_leader_sends_a_rack_b_consumer_to_the_rack_b_follower_at_once_without_records(broker):
    _leader_with_followers(broker, {2: 5, 3: 5})
    [r] = fetch(broker.replica_manager, 0, "b", max_wait_ms=30000)  # answered now, not parked
    assert (r.error_code, r.preferred_read_replica, r.records.size_in_bytes) == (errors.NONE, 2, 0)
    assert (r.high_watermark, r.log_start_offset) == (5, 0)


def test_leader_serves_its_own_rack_clients_without_rack_and_old_fetches(broker):
    _leader_with_followers(broker, {2: 5, 3: 5})
    for rack in ("a", "", "z", None):
        [r] = fetch(broker.replica_manager, 0, rack)
        assert (r.error_code, r.preferred_read_replica) == (errors.NONE, -1), rack
        assert r.records.size_in_bytes > 0


def test_leader_does_not_prefer_a_follower_without_the_fetch_offset(broker):
    _leader_with_followers(broker, {2: 3})  # follower 2 has offsets [0, 3); follower 3 never fetched
    assert fetch(broker.replica_manager, 3, "b")[0].preferred_read_replica == 2  # 3 = its LEO: in range
    [r] = fetch(broker.replica_manager, 4, "b")  # past follower 2's end: read here (above the HW: empty)
    assert (r.error_code, r.preferred_read_replica) == (errors.NONE, -1)
    assert fetch(broker.replica_manager, 0, "c")[0].preferred_read_replica == -1


def test_leader_does_not_prefer_a_follower_out_of_the_isr_or_fenced(broker):
    _leader_with_followers(broker, {2: 5, 3: 5})
    broker.set_isr("t", 0, (1, 3))
    assert fetch(broker.replica_manager, 0, "b")[0].preferred_read_replica == -1
    assert fetch(broker.replica_manager, 0, "c")[0].preferred_read_replica == 3
    image = broker.cache.image
    broker.cache.set_image(dataclasses.replace(image, brokers={**image.brokers, 3: _broker(3, "c", fenced=True)}))
    assert fetch(broker.replica_manager, 0, "c")[0].preferred_read_replica == -1


def test_no_preferred_read_replica_without_a_selector(broker):
    _leader_with_followers(broker, {2: 5, 3: 5})
    broker.replica_manager.replica_selector = None
    assert fetch(broker.replica_manager, 0, "b")[0].preferred_read_replica == -1


# -- a follower serving consumer fetches ---------------------------------------------------------------------


def _follower(broker, high_watermark: int) -> None:
    """t-0 with 5 records (batches [0, 3) and [3, 5)), now followed here (leader 2, leader epoch 3), its HW
    at ``high_watermark``."""
    broker.add_topic("t", 1)
    rm = broker.replica_manager
    rm.append_records(1000, 1, False, {("t", 0): records(3)}, lambda r: None)
    rm.append_records(1000, 1, False, {("t", 0): records(2)}, lambda r: None)
    partition = rm.get_partition("t", 0)
    partition.make_follower(PartitionRegistration(replicas=(2, 1, 3), isr=(2, 1, 3), leader=2, leader_epoch=3))
    partition.log.update_high_watermark(high_watermark)


def test_follower_serves_a_consumer_up_to_its_high_watermark(broker):
    _follower(broker, 3)
    rm = broker.replica_manager
    [r] = fetch(rm, 0, "b")
    assert (r.error_code, r.high_watermark, r.preferred_read_replica) == (errors.NONE, 3, -1)
    assert record_count(r.records) == 3  # the first batch only: the second is above the HW
    [r] = fetch(rm, 3, "b")  # at the HW: nothing yet
    assert (r.error_code, r.records.size_in_bytes) == (errors.NONE, 0)
    [r] = fetch(rm, 4, "")  # above the HW, within the log: nothing yet (a consumer without client.rack, v11+)
    assert (r.error_code, r.records.size_in_bytes) == (errors.NONE, 0)
    assert fetch(rm, 6, "b")[0].error_code == errors.OFFSET_OUT_OF_RANGE  # past the follower's log end


def test_follower_fences_consumer_fetches_by_leader_epoch_and_refuses_old_fetches(broker):
    _follower(broker, 5)
    rm = broker.replica_manager
    assert fetch(rm, 0, "b", epoch=3)[0].error_code == errors.NONE
    assert fetch(rm, 0, "b", epoch=2)[0].error_code == errors.FENCED_LEADER_EPOCH
    assert fetch(rm, 0, "b", epoch=4)[0].error_code == errors.UNKNOWN_LEADER_EPOCH
    assert fetch(rm, 0, None)[0].error_code == errors.NOT_LEADER_OR_FOLLOWER  # Fetch < v11: leader only


def test_follower_completes_a_waiting_consumer_fetch_when_its_high_watermark_moves(broker):
    _follower(broker, 5)
    rm = broker.replica_manager
    out: list = []
    client = ClientMetadata("b", "c", "127.0.0.1", "User:ANONYMOUS", "PLAINTEXT")
    params = FetchParams(-1, 30000, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK, -1, client)
    rm.fetch_messages(params, [PartitionFetch("t", 0, 5, 1 << 20)], out.append)
    assert out == []  # parked: nothing above the follower's HW
    partition = rm.get_partition("t", 0)
    partition.append_records_as_follower(b"", 5, 0)
    rm.complete_delayed_fetch_requests([("t", 0)])
    assert out == []  # the HW did not move: still waiting
    partition.log.append_as_follower(_batch_at(5))
    partition.append_records_as_follower(b"", 7, 0)
    rm.complete_delayed_fetch_requests([("t", 0)])
    [(_, r)] = out[0]
    assert (r.error_code, r.high_watermark) == (errors.NONE, 7)
    assert r.records.size_in_bytes > 0


def record_count(records) -> int:
    return sum(batch.records_count for _, batch in iter_batches(memoryview(records.read_bytes())))


def _batch_at(base_offset: int) -> memoryview:
    """Two records as a leader's batch at ``base_offset`` (leader epoch 3)."""
    from pykbroker.record.memory_records_builder import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(base_offset=base_offset, partition_leader_epoch=3)
    b.append(0, b"k", b"v")
    b.append(1, b"k", b"v")
    return memoryview(bytearray(b.build()))
