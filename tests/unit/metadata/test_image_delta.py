"""MetadataImage / MetadataDelta: replay, apply, immutability, local changes, image -> records round trip;
and every record this package writes survives the real metadata record codec."""

from __future__ import annotations

import uuid

import pytest

from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.image import EMPTY_IMAGE, MetadataProvenance
from pykbroker.metadata.records import (
    ApiMessageAndVersion,
    MetadataRecordSerde,
    config_record,
    feature_level_record,
    no_op_record,
    partition_record,
    producer_ids_record,
    remove_topic_record,
    topic_record,
)
from pykbroker.protocol.config_resource import ConfigResourceType

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def register(broker_id, fenced=False):
    return ApiMessageAndVersion(
        "RegisterBrokerRecord",
        3,
        {
            "broker_id": broker_id,
            "is_migrating_zk_broker": False,
            "incarnation_id": uuid.UUID(int=100 + broker_id),
            "broker_epoch": 10 + broker_id,
            "end_points": [
                {"name": "PLAINTEXT", "host": "localhost", "port": 9092 + broker_id, "security_protocol": 0}
            ],
            "features": [{"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 22}],
            "rack": None,
            "fenced": fenced,
            "in_controlled_shutdown": False,
            "log_dirs": [],
        },
    )


def change(topic_id, p, **kw):
    return ApiMessageAndVersion("PartitionChangeRecord", 0, {"partition_id": p, "topic_id": topic_id, **kw})


def base_records():
    return [
        feature_level_record("metadata.version", 22),
        register(1),
        register(2),
        topic_record("foo", T1),
        config_record(ConfigResourceType.TOPIC, "foo", "retention.ms", "1000"),
        partition_record(T1, 0, [1, 2], [1, 2], 1),
        partition_record(T1, 1, [2, 1], [2, 1], 2),
        producer_ids_record(1, 11, 1000),
        no_op_record(),
    ]


def build():
    return MetadataDelta(EMPTY_IMAGE).replay_all(base_records()).apply(MetadataProvenance(8, 1))


def test_apply_builds_image():
    image = build()
    assert image.offset == 8 and image.metadata_version == 22 and image.next_producer_id == 1000
    assert image.brokers[1].listeners["PLAINTEXT"].port == 9093 and not image.brokers[1].fenced
    foo = image.topics.get_topic("foo")
    assert foo is image.topics.get_topic(T1)
    assert foo.partitions[1].leader == 2 and foo.partitions[1].isr == (2, 1)
    assert image.topic_configs("foo") == {"retention.ms": "1000"}
    with pytest.raises(TypeError):
        image.topics.by_name["x"] = foo  # read-only views
    assert EMPTY_IMAGE.is_empty() and not image.is_empty()


def test_delta_changes_share_untouched_parts_and_keep_old_image():
    image = build()
    delta = MetadataDelta(image)
    delta.replay(change(T1, 0, leader=2, isr=[2]))
    delta.replay(topic_record("bar", T2))
    delta.replay(partition_record(T2, 0, [1], [1], 1))
    new = delta.apply(MetadataProvenance(11, 1))
    assert new.topics.get_partition(T1, 0).leader == 2
    assert new.topics.get_partition(T1, 0).leader_epoch == 1 and new.topics.get_partition(T1, 0).partition_epoch == 1
    assert image.topics.get_partition(T1, 0).leader == 1  # old image untouched
    assert new.brokers is image.brokers and new.configs is image.configs
    assert delta.topics.created_topic_ids == {T2}
    assert delta.topics.changed_topics[T2].new_partitions() == [0]


def test_isr_only_change_bumps_partition_epoch_only():
    image = build()
    delta = MetadataDelta(image)
    delta.replay(change(T1, 1, isr=[2]))
    reg = delta.apply().topics.get_partition(T1, 1)
    assert (reg.leader, reg.leader_epoch, reg.partition_epoch, reg.isr) == (2, 0, 1, (2,))


def test_remove_topic_drops_configs_and_reports_local_deletes():
    image = build()
    delta = MetadataDelta(image)
    delta.replay(remove_topic_record(T1))
    new = delta.apply()
    assert new.topics.get_topic("foo") is None and new.topic_configs("foo") == {}
    changes = delta.topics.local_changes(1)
    assert changes.deletes == {("foo", 0), ("foo", 1)}


def test_create_then_delete_in_one_delta_and_recreate():
    delta = MetadataDelta(build())
    delta.replay(topic_record("tmp", T2))
    delta.replay(remove_topic_record(T2))
    assert delta.topics.created_topic_ids == set() and delta.apply().topics.get_topic("tmp") is None
    new_id = uuid.UUID(int=3)
    delta = MetadataDelta(build())
    delta.replay(remove_topic_record(T1))
    delta.replay(topic_record("foo", new_id))
    delta.replay(config_record(ConfigResourceType.TOPIC, "foo", "cleanup.policy", "compact"))
    new = delta.apply()
    assert new.topics.get_topic("foo").id == new_id
    assert new.topic_configs("foo") == {"cleanup.policy": "compact"}


def test_local_changes_leaders_and_followers():
    delta = MetadataDelta(EMPTY_IMAGE).replay_all(base_records())
    changes = delta.topics.local_changes(1)
    assert set(changes.leaders) == {("foo", 0)} and set(changes.followers) == {("foo", 1)}
    assert changes.leaders[("foo", 0)][0] == T1
    image = delta.apply()
    moved = MetadataDelta(image)
    moved.replay(change(T1, 1, replicas=[2], isr=[2]))
    assert moved.topics.local_changes(1).deletes == {("foo", 1)}


def test_broker_fencing_records():
    image = build()
    delta = MetadataDelta(image)
    delta.replay(ApiMessageAndVersion("FenceBrokerRecord", 0, {"id": 2, "epoch": 12}))
    delta.replay(
        ApiMessageAndVersion("BrokerRegistrationChangeRecord", 0, {"broker_id": 1, "broker_epoch": 11, "fenced": 1})
    )
    new = delta.apply()
    assert new.brokers[2].fenced and new.brokers[1].fenced
    delta = MetadataDelta(new)
    delta.replay(ApiMessageAndVersion("UnregisterBrokerRecord", 0, {"broker_id": 2, "broker_epoch": 12}))
    assert 2 not in delta.apply().brokers


def test_unknown_topic_records_raise():
    with pytest.raises(ValueError):
        MetadataDelta(EMPTY_IMAGE).replay(partition_record(T1, 0, [1], [1], 1))
    with pytest.raises(ValueError):
        MetadataDelta(EMPTY_IMAGE).replay(remove_topic_record(T1))


def test_image_to_records_round_trip():
    image = build()
    again = MetadataDelta(EMPTY_IMAGE).replay_all(image.to_records()).apply(image.provenance)
    assert again == image


def test_feature_level_zero_removes():
    image = build()
    delta = MetadataDelta(image)
    delta.replay(feature_level_record("metadata.version", 0))
    assert delta.apply().metadata_version is None


def test_records_survive_the_metadata_record_codec():
    serde = MetadataRecordSerde()
    image = build()
    records = (
        base_records()
        + image.to_records()
        + [
            remove_topic_record(T1),
            change(T1, 0, leader=2, isr=[2]),
            ApiMessageAndVersion("FenceBrokerRecord", 0, {"id": 2, "epoch": 12}),
            config_record(ConfigResourceType.TOPIC, "foo", "retention.ms", None),
        ]
    )
    for r in records:
        name, version, data = serde.read(serde.write(r))
        assert (name, version) == (r.name, r.version)
        for k, v in r.data.items():
            assert data[k] == v, (r.name, k)
