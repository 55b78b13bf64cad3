"""Metadata snapshots: image -> records -> image, a snapshot replacing the image (deletions included), the
SnapshotGenerator's triggers, and a controller + loader restarting from a snapshot of a cleaned log."""

from __future__ import annotations

import uuid

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from pykbroker.metadata.metadata_loader import MetadataLoader
from pykbroker.metadata.records import (
    MetadataRecordSerde,
    config_record,
    feature_level_record,
    partition_record,
    topic_record,
)
from pykbroker.metadata.snapshot_generator import SnapshotGenerator
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.raft.raft_client import Batch
from pykbroker.raft.records_snapshot import RecordsSnapshotReader, RecordsSnapshotWriter
from pykbroker.raft.replicated_log import MemoryReplicatedLog
from pykbroker.raft.snapshots import MemoryRawSnapshotWriter, SnapshotId
from pykbroker.utils.time import MockTime
from tests.helpers.wait import wait_until
from tests.unit.metadata.test_image_delta import T1, T2, base_records, change, register
from tests.unit.metadata.test_quorum_controller import TIMEOUT, Node, RecordingPublisher, create

T3 = uuid.UUID(int=3)


def rich_image() -> MetadataImage:
    records = base_records() + [
        register(3, fenced=True),
        change(T1, 0, leader=2, isr=[2]),
        config_record(ConfigResourceType.BROKER, "1", "log.retention.ms", "5"),
        topic_record("bar", T2),
        partition_record(T2, 0, [3], [3], 3),
    ]
    return MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(MetadataProvenance(20, 3, 99))


def test_image_round_trips_through_its_records_and_the_codec():
    image = rich_image()
    serde = MetadataRecordSerde()
    records = [serde.read(serde.write(r)) for r in image.to_records()]
    again = MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(image.provenance)
    assert again == image
    assert again.brokers[3].fenced and not again.brokers[1].fenced
    assert again.topics.get_topic("foo").partitions[0].leader == 2
    assert again.configs[(ConfigResourceType.BROKER, "1")] == {"log.retention.ms": "5"}


def test_snapshot_replaces_the_image_and_reports_what_disappeared():
    image = rich_image()  # topics foo (T1, on brokers 1 and 2) and bar (T2, on broker 3)
    snapshot = [
        feature_level_record("metadata.version", 22),
        register(1),
        topic_record("foo", T1),
        partition_record(T1, 0, [1, 2], [1, 2], 1),
        partition_record(T1, 1, [2, 1], [2, 1], 2),
        topic_record("baz", T3),
        partition_record(T3, 0, [1], [1], 1),
    ]
    delta = MetadataDelta(image).replay_all(snapshot)
    delta.finish_snapshot()
    new = delta.apply(MetadataProvenance(40, 4))
    fresh = MetadataDelta(EMPTY_IMAGE).replay_all(snapshot).apply(MetadataProvenance(40, 4))
    assert new == fresh  # exactly the snapshot's state
    assert set(delta.topics.deleted_topics) == {T2} and delta.topics.created_topic_ids == {T3}
    assert set(new.brokers) == {1} and new.configs == {} and new.next_producer_id == 0
    assert delta.topics.local_changes(3).deletes == {("bar", 0)}
    assert ("baz", 0) in delta.topics.local_changes(1).leaders


def memory_snapshot(snapshot_id, records, store):
    writer = RecordsSnapshotWriter(MemoryRawSnapshotWriter(snapshot_id, store.append), MetadataRecordSerde(), 0)
    writer.append(records)
    writer.freeze()
    return RecordsSnapshotReader(store[-1], MetadataRecordSerde())


def test_loader_loads_a_snapshot_and_publishes_a_full_replacement():
    loader = MetadataLoader(1, "c", lambda: None)
    publisher = RecordingPublisher()
    loader.install_publishers([publisher]).result(TIMEOUT)
    try:
        loader.handle_commit(Batch(0, 1, 8, base_records(), append_time_ms=5))
        wait_until(lambda: publisher.image is not None and publisher.image.offset == 8, TIMEOUT, 0.005)
        store: list = []
        reader = memory_snapshot(SnapshotId(31, 2), [feature_level_record("metadata.version", 22), register(7)], store)
        loader.handle_load_snapshot(reader)
        wait_until(lambda: publisher.image.offset == 30, TIMEOUT, 0.005)
        delta, image = publisher.updates[-1]
        assert image.provenance.epoch == 2 and set(image.brokers) == {7} and not image.topics.by_id
        assert set(delta.topics.deleted_topics) == {T1}
        assert image.cluster_id == "c"
        loader.handle_commit(Batch(31, 2, 31, [topic_record("later", T2)]))
        wait_until(lambda: publisher.image.offset == 31, TIMEOUT, 0.005)
        assert publisher.image.topics.get_topic("later") is not None and set(publisher.image.brokers) == {7}
    finally:
        loader.close()


def test_generator_triggers_on_bytes_and_on_time():
    written: list = []

    def create_snapshot(snapshot_id, time_ms):
        return RecordsSnapshotWriter(
            MemoryRawSnapshotWriter(snapshot_id, written.append), MetadataRecordSerde(), time_ms
        )

    time = MockTime()
    gen = SnapshotGenerator(
        1, create_snapshot, time, max_bytes_since_last_snapshot=100, max_time_since_last_snapshot_ms=1000
    )
    image = rich_image()
    gen.record_committed_bytes(99)
    assert gen.maybe_generate(image) is None
    gen.record_committed_bytes(1)
    assert gen.maybe_generate(image) == SnapshotId(21, 3)
    records = RecordsSnapshotReader(written[-1], MetadataRecordSerde()).records()
    assert MetadataDelta(EMPTY_IMAGE).replay_all(records).apply(image.provenance) == image
    gen.record_committed_bytes(1)
    time.sleep(999)
    assert gen.maybe_generate(image) is None
    time.sleep(1)
    assert gen.maybe_generate(image) == SnapshotId(21, 3)
    time.sleep(5000)
    assert gen.maybe_generate(image) is None  # nothing committed since
    gen.record_committed_bytes(1)
    assert gen.maybe_generate(image) == SnapshotId(21, 3)  # the interval had passed already
    never = SnapshotGenerator(1, create_snapshot, time, 1 << 30, 0)  # 0 disables the time trigger
    never.record_committed_bytes(1)
    time.sleep(10**9)
    assert never.maybe_generate(image) is None


def test_controller_and_loader_restart_from_a_snapshot_of_a_cleaned_log(tmp_path):
    log = MemoryReplicatedLog()
    first = Node(log, tmp_path)
    try:
        generator = SnapshotGenerator(1, first.raft.create_snapshot, max_bytes_since_last_snapshot=1)
        first.loader.snapshot_generator = generator
        first.register_broker()
        topic_id = create(first, "persist").result(TIMEOUT)["topics"][0]["topic_id"]
        first.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": -1}).result(TIMEOUT)
        wait_until(lambda: log.start_offset() > 0 and generator.snapshots_written, TIMEOUT, 0.005, "log cleaned")
        image = first.loader.image
    finally:
        first.stop()
    assert 0 < log.start_offset() <= log.latest_snapshot_id().end_offset  # (the last one may be uncleaned)
    second = Node(log, tmp_path)
    try:
        restored = second.wait_image(lambda i: i.topics.get_topic("persist") is not None)
        assert restored.topics.get_topic("persist").id == topic_id and restored.next_producer_id == 1000
        assert restored.brokers.keys() == image.brokers.keys() and restored.metadata_version == 25
        # the controller loaded the snapshot too: duplicates are refused, producer ids continue
        assert create(second, "persist").result(TIMEOUT)["topics"][0]["error_code"] == errors.TOPIC_ALREADY_EXISTS
        nxt = second.controller.allocate_producer_ids({"broker_id": 1, "broker_epoch": -1}).result(TIMEOUT)
        assert nxt["producer_id_start"] == 1000
    finally:
        second.stop()
