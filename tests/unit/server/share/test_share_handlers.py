"""ShareFetch / ShareAcknowledge handlers and the SharePartitionManager in process, on a real log (LocalBroker):
authorization (READ on the group and on the topic), NOT_LEADER_OR_FOLLOWER with the current leader, read_committed
share groups never receiving aborted records, the closing epoch releasing what the member holds, the records answered
being the log's batches up to the last acquired one."""

from __future__ import annotations

import dataclasses
import uuid
from types import SimpleNamespace

import pytest

from pykbroker.log.producer_state_entry import AppendOrigin
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.protocol.resource import ResourceType
from pykbroker.record.control_record import ControlRecordType, EndTransactionMarker
from pykbroker.record.default_record_batch import iter_batches
from pykbroker.record.memory_records_builder import MemoryRecordsBuilder
from pykbroker.server.handlers.share import ShareHandlers
from pykbroker.server.request_helper import RequestHelper
from pykbroker.server.share.share_partition_manager import SharePartitionManager
from tests.unit.log.log_test_utils import assign_offsets
from tests.unit.server.apis_harness import LocalBroker, RecordingChannel, decode_sent, make_request, records

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    yield b
    b.close()


class DenyAuthorizer:
    """Allows everything but READ on the named resources."""

    def __init__(self, denied: set[tuple[int, str]]):
        self.denied = denied

    def authorize(self, principal, address, operation, resource_type, name) -> bool:
        return not (operation == AclOperation.READ and (resource_type, name) in self.denied)


def setup(broker, authorizer=None, group_configs=None):
    if group_configs:
        image = broker.cache.image
        configs = {**image.configs, (ConfigResourceType.GROUP, "g"): group_configs}
        broker.cache.set_image(dataclasses.replace(image, configs=configs))
    config = {
        **broker.CONFIG,
        "group.share.record.lock.duration.ms": 30000,
    }
    manager = SharePartitionManager(
        broker.replica_manager, config, broker.time, image=lambda: broker.cache.image, reaper_enabled=False
    )
    channel = RecordingChannel()
    helper = RequestHelper(lambda request: channel, authorizer=authorizer)
    return ShareHandlers(helper, broker.cache, manager), channel, manager


def call(handlers, channel, api_key, body):
    request = make_request(api_key, 1, body)
    (handlers.handle_share_fetch if api_key == ApiKeys.SHARE_FETCH else handlers.handle_share_acknowledge)(request)
    assert len(channel.responses) == 1
    return decode_sent(channel.responses.pop(), api_key, 1)[1]


def fetch(handlers, channel, tid, epoch, acks=(), member="m", max_records=500):
    body = {
        "group_id": "g",
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": max_records,
        "batch_size": 500,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [
                            {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks
                        ],
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    return call(handlers, channel, ApiKeys.SHARE_FETCH, body)


def only_partition(r):
    assert r["error_code"] == errors.NONE, r
    [topic] = r["responses"]
    [p] = topic["partitions"]
    return p


def ranges(p):
    return [(a["first_offset"], a["last_offset"], a["delivery_count"]) for a in p["acquired_records"]]


def append(broker, data):
    broker.replica_manager.append_records(1000, 1, False, {("t", 0): data}, lambda r: None)


def test_group_and_topic_authorization(broker):
    tid = broker.add_topic("t")
    handlers, channel, _ = setup(broker, DenyAuthorizer({(ResourceType.GROUP, "g")}))
    assert fetch(handlers, channel, tid, 0)["error_code"] == errors.GROUP_AUTHORIZATION_FAILED
    handlers, channel, _ = setup(broker, DenyAuthorizer({(ResourceType.TOPIC, "t")}))
    p = only_partition(fetch(handlers, channel, tid, 0))
    assert p["error_code"] == errors.TOPIC_AUTHORIZATION_FAILED and p["acquired_records"] == []


def test_not_leader_names_the_current_leader(broker):
    tid = broker.add_topic("t", replicas=(1, 2))
    handlers, channel, manager = setup(broker)
    assert fetch(handlers, channel, tid, 0)["error_code"] == errors.NONE  # creates the share partition here
    # broker 2 becomes the leader (epoch 1): this broker's share partition is dropped
    reg = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=2, leader_epoch=1)
    image = broker.cache.image
    topic = dataclasses.replace(image.topics.by_id[tid], partitions={0: reg})
    topics = dataclasses.replace(image.topics, by_id={tid: topic}, by_name={"t": topic})
    broker.cache.set_image(dataclasses.replace(image, topics=topics))
    broker.replica_manager.on_leadership_lost = manager.on_partitions_moved  # as BrokerServer wires it
    assert manager.get("g", tid, 0) is not None
    broker.replica_manager.apply_delta(
        SimpleNamespace(deletes=set(), leaders={}, followers={("t", 0): (tid, reg)}), None
    )
    assert manager.get("g", tid, 0) is None  # dropped as soon as this broker follows
    p = only_partition(fetch(handlers, channel, tid, 1))
    assert p["error_code"] == errors.NOT_LEADER_OR_FOLLOWER
    assert p["current_leader"] == {"leader_id": 2, "leader_epoch": 1}


def test_records_answered_are_whole_batches_up_to_the_last_acquired(broker):
    tid = broker.add_topic("t")
    handlers, channel, manager = setup(broker, group_configs={"share.auto.offset.reset": "earliest"})
    for i in range(3):
        append(broker, records(2, start=2 * i))  # batches 0-1, 2-3, 4-5
    p = only_partition(fetch(handlers, channel, tid, 0))
    assert ranges(p) == [(0, 5, 1)]
    assert [(b.base_offset, b.last_offset) for _, b in iter_batches(memoryview(bytes(p["records"])))] == [
        (0, 1),
        (2, 3),
        (4, 5),
    ]
    # release 2-3: the next fetch reads from 2 and answers batch 2-3 only (4-5 is still held)
    p = only_partition(fetch(handlers, channel, tid, 1, acks=[(0, 1, 1), (2, 3, 2)]))
    assert p["acknowledge_error_code"] == errors.NONE
    assert ranges(p) == [(2, 3, 2)]
    assert [(b.base_offset, b.last_offset) for _, b in iter_batches(memoryview(bytes(p["records"])))] == [(2, 3)]
    sp = manager.get("g", tid, 0)
    assert (sp.start_offset, sp.end_offset) == (2, 6)


def test_closing_epoch_acknowledges_then_releases_the_rest(broker):
    tid = broker.add_topic("t")
    handlers, channel, manager = setup(broker, group_configs={"share.auto.offset.reset": "earliest"})
    append(broker, records(4))
    assert ranges(only_partition(fetch(handlers, channel, tid, 0))) == [(0, 3, 1)]
    body = {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": -1,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}],
                    }
                ],
            }
        ],
    }
    r = call(handlers, channel, ApiKeys.SHARE_ACKNOWLEDGE, body)
    assert only_partition(r)["error_code"] == errors.NONE
    assert manager.get("g", tid, 0).snapshot() == [(2, 3, 0, 1, None)]
    assert len(manager.session_cache) == 0
    assert ranges(only_partition(fetch(handlers, channel, tid, 0, member="n"))) == [(2, 3, 2)]


class TxnProducer:
    def __init__(self, log, pid):
        self.log, self.pid, self.seq = log, pid, 0

    def send(self, n):
        b = MemoryRecordsBuilder(is_transactional=True)
        b.set_producer_state(self.pid, 0, self.seq, True)
        for i in range(n):
            b.append(NOW, None, b"v%d" % i)
        self.seq += n
        self.log.append_as_leader(b.build(), 0, assign_offsets(), AppendOrigin.CLIENT)

    def end(self, commit):
        b = MemoryRecordsBuilder(is_transactional=True, is_control_batch=True)
        b.set_producer_state(self.pid, 0, -1, True)
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        b.append_end_txn_marker(NOW, EndTransactionMarker(kind, 0))
        self.log.append_as_leader(b.build(), 0, assign_offsets(), AppendOrigin.COORDINATOR)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_read_committed_share_group_never_gets_aborted_records(broker, isolation):
    tid = broker.add_topic("t")
    handlers, channel, manager = setup(
        broker, group_configs={"share.auto.offset.reset": "earliest", "share.isolation.level": isolation}
    )
    log = broker.replica_manager.get_partition("t", 0).log
    log.producer_state_manager.transaction_verification_enabled = False  # no transaction coordinator here
    aborted, committed, open_txn = TxnProducer(log, 1), TxnProducer(log, 2), TxnProducer(log, 3)
    aborted.send(2)  # 0-1
    committed.send(2)  # 2-3
    aborted.end(commit=False)  # 4
    committed.end(commit=True)  # 5
    open_txn.send(1)  # 6: not decided: above the LSO
    log.update_high_watermark(log.log_end_offset)
    p = only_partition(fetch(handlers, channel, tid, 0))
    if isolation == "read_committed":
        assert ranges(p) == [(2, 3, 1)]
        sp = manager.get("g", tid, 0)
        assert sp.start_offset == 2 and sp.end_offset == 6  # the aborted batch and the markers are archived
    else:
        assert ranges(p) == [(0, 3, 1), (6, 6, 1)]


def test_a_change_of_share_isolation_level_applies_to_existing_share_partitions(broker):
    """librdkafka 0177 do_test_dynamic_uncommitted_to_committed: share.isolation.level altered to read_committed
    while the group consumes; Kafka takes the fetch isolation from the group config on each ShareFetch."""
    tid = broker.add_topic("t")
    handlers, channel, manager = setup(
        broker, group_configs={"share.auto.offset.reset": "earliest", "share.isolation.level": "read_uncommitted"}
    )
    log = broker.replica_manager.get_partition("t", 0).log
    log.producer_state_manager.transaction_verification_enabled = False  # no transaction coordinator here
    producer = TxnProducer(log, 1)
    producer.send(2)  # 0-1
    producer.end(commit=False)  # 2
    log.update_high_watermark(log.log_end_offset)
    assert ranges(only_partition(fetch(handlers, channel, tid, 0))) == [(0, 1, 1)]  # aborted, but read_uncommitted
    setup(broker, group_configs={"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
    producer.send(2)  # 3-4
    producer.end(commit=False)  # 5
    log.update_high_watermark(log.log_end_offset)
    r = fetch(handlers, channel, tid, 1)
    assert r["error_code"] == errors.NONE
    assert [ranges(p) for t in r["responses"] for p in t["partitions"] if p["acquired_records"]] == []
    sp = manager.get("g", tid, 0)
    assert sp.config.read_committed and sp.end_offset == 6  # 3-4 (aborted) and the marker archived, not acquired


def test_unknown_topic_id_and_member_validation(broker):
    broker.add_topic("t")
    handlers, channel, _ = setup(broker)
    p = only_partition(fetch(handlers, channel, uuid.uuid4(), 0))
    assert p["error_code"] == errors.UNKNOWN_TOPIC_ID
    assert fetch(handlers, channel, uuid.uuid4(), 0, member="")["error_code"] == errors.INVALID_REQUEST


def test_max_records_zero_only_acknowledges(broker):
    tid = broker.add_topic("t")
    handlers, channel, manager = setup(broker, group_configs={"share.auto.offset.reset": "earliest"})
    append(broker, records(2))
    assert ranges(only_partition(fetch(handlers, channel, tid, 0))) == [(0, 1, 1)]
    append(broker, records(2, start=2))
    # librdkafka's acknowledgement-only ShareFetch: 0-1 accepted, 2-3 not acquired
    p = only_partition(fetch(handlers, channel, tid, 1, acks=[(0, 1, 1)], max_records=0))
    assert p["acknowledge_error_code"] == errors.NONE and p["acquired_records"] == []
    sp = manager.get("g", tid, 0)
    assert (sp.start_offset, sp.end_offset) == (2, 2)
    assert ranges(only_partition(fetch(handlers, channel, tid, 2))) == [(2, 3, 1)]
