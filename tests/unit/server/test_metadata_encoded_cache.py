"""Metadata answers from the per-topic encodings cached by the MetadataHandler (issue 31: Metadata for many
topics): byte-for-byte what encoding the dicts gives, at every version, and never stale: a delta that changes a
topic (leader, ISR), deletes one or fences a broker is answered at once; error counts of the request metrics
still see the partitions' errors (codec.EncodedStruct.error_counts)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from pykbroker.metadata.image import TopicImage, TopicsImage
from pykbroker.metadata.partition_registration import PartitionRegistration
from pykbroker.protocol import errors, response_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.codec import EncodedStruct, encode, encode_struct_element
from pykbroker.server.handlers.metadata import MetadataHandler
from tests.unit.server.apis_harness import LocalBroker, decode_sent, make_request, only_response, recording_helper


@pytest.fixture
def broker(tmp_path):
    b = LocalBroker(tmp_path / "logs")
    b.add_topic("t", 2)
    b.add_topic("u", 1)
    yield b
    b.close()


class Metadata:
    def __init__(self, broker):
        self.helper, self.channel = recording_helper()
        self.handler = MetadataHandler(self.helper, broker.cache)

    def call(self, version: int, topics=None, include_ops: bool = False) -> dict:
        body = {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": include_ops,
        }
        self.handler.handle_topic_metadata_request(make_request(ApiKeys.METADATA, version, body))
        return decode_sent(only_response(self.channel), ApiKeys.METADATA, version)[1]


def set_topic(broker, name: str, partitions: dict[int, PartitionRegistration]) -> None:
    """A delta replacing topic ``name``'s partitions (a new TopicImage, as MetadataDelta.apply makes)."""
    image = broker.cache.image
    old = image.topics.by_name[name]
    new = TopicImage(name, old.id, partitions)
    topics = TopicsImage({**image.topics.by_id, old.id: new}, {**image.topics.by_name, name: new})
    broker.cache.set_image(dataclasses.replace(image, topics=topics))


def view(body: dict) -> dict:
    return {
        t["name"]: [
            (p["partition_index"], p["leader_id"], p["isr_nodes"], p["offline_replicas"]) for p in t["partitions"]
        ]
        for t in body["topics"]
    }


@pytest.mark.parametrize("version", [0, 1, 5, 9, 10, 12, 13])
def test_encoded_entry_is_what_the_dict_encodes_to(version):
    schema = response_schema(ApiKeys.METADATA)
    topic = {
        "error_code": 0,
        "name": "t",
        "topic_id": uuid.UUID(int=5),
        "is_internal": False,
        "partitions": [
            {
                "error_code": 5,
                "partition_index": 0,
                "leader_id": -1,
                "leader_epoch": 3,
                "replica_nodes": [1, 2],
                "isr_nodes": [1],
                "offline_replicas": [2],
            },
        ],
        "topic_authorized_operations": -2147483648,
    }
    body = {"brokers": [], "cluster_id": None, "controller_id": 1, "topics": [topic]}
    entry = encode_struct_element(schema, version, ("topics",), topic)
    assert isinstance(entry, EncodedStruct)
    assert entry.error_counts == {0: 1, 5: 1}
    assert encode(schema, version, {**body, "topics": [entry]}) == encode(schema, version, body)


def test_changed_topic_is_answered_at_once_and_the_unchanged_one_from_the_cache(broker):
    md = Metadata(broker)
    assert view(md.call(12)) == {"t": [(0, 1, [1], []), (1, 1, [1], [])], "u": [(0, 1, [1], [])]}
    cached_u = md.handler._encoded[(12, "PLAINTEXT")]["u"][2]
    set_topic(
        broker,
        "t",
        {
            0: PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=2, leader_epoch=1),
            1: PartitionRegistration(replicas=(1,), isr=(1,), leader=1),
        },
    )
    # broker 2 is not registered: Kafka's offline replica
    assert view(md.call(12)) == {"t": [(0, 2, [1, 2], [2]), (1, 1, [1], [])], "u": [(0, 1, [1], [])]}
    assert md.handler._encoded[(12, "PLAINTEXT")]["u"][2] is cached_u
    assert view(md.call(12, [{"name": "t", "topic_id": uuid.UUID(int=0)}])) == {
        "t": [(0, 2, [1, 2], [2]), (1, 1, [1], [])]
    }


def test_fenced_broker_and_deleted_topic_are_answered_at_once(broker):
    md = Metadata(broker)
    md.call(12)
    image = broker.cache.image
    me = image.brokers[1]
    broker.cache.set_image(dataclasses.replace(image, brokers={1: dataclasses.replace(me, fenced=True)}))
    assert view(md.call(12)) == {"t": [(0, 1, [1], [1]), (1, 1, [1], [1])], "u": [(0, 1, [1], [1])]}
    image = broker.cache.image
    u = image.topics.by_name["u"]
    topics = TopicsImage(
        {i: t for i, t in image.topics.by_id.items() if i != u.id},
        {n: t for n, t in image.topics.by_name.items() if n != "u"},
    )
    broker.cache.set_image(dataclasses.replace(image, topics=topics))
    assert set(view(md.call(12))) == {"t"}


def test_versions_and_authorized_operations_are_kept_apart(broker):
    md = Metadata(broker)
    v12 = md.call(12)
    v1 = md.call(1)
    assert view(v12) == view(v1) and all(t["topic_id"] == uuid.UUID(int=0) for t in v1["topics"])
    with_ops = md.call(12, include_ops=True)
    assert all(t["topic_authorized_operations"] > 0 for t in with_ops["topics"])
    assert all(t["topic_authorized_operations"] == -2147483648 for t in md.call(12)["topics"])


def test_error_counts_include_the_cached_partitions_errors(broker):
    md = Metadata(broker)
    set_topic(broker, "u", {0: PartitionRegistration(replicas=(1,), isr=(1,), leader=-1, leader_epoch=1)})
    for _ in range(2):  # encoded, then from the cache
        md.call(12)
        assert md.channel.errors[-1][1] == {
            errors.NONE: 5,
            errors.LEADER_NOT_AVAILABLE: 1,
        }  # response, topics, partitions
