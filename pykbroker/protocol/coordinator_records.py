"""Keys and values of the coordinators' records: ``__consumer_offsets``, ``__transaction_state`` and
``__share_group_state``.

Mirrors the ``"type": "data"`` message specs of Kafka's group-coordinator module (``OffsetCommitKey/Value``,
``GroupMetadataKey/Value``, ``ConsumerGroup*Key/Value``, ``ShareGroup*Key/Value``), transaction-coordinator module
(``TransactionLogKey/Value``) and share-coordinator module (``ShareSnapshotKey/Value``, ``ShareUpdateKey/Value``),
and their frame (``GroupCoordinatorRecordSerde`` / ``TransactionLog`` / ``ShareCoordinatorRecordSerde``): a key or a
value is ``int16 version`` followed by the message at that version. A key's version names the record type
(``__consumer_offsets``: 0-1 offset commit, 2 group metadata, 3-8 consumer-group records, 10-15 share-group
records; ``__transaction_state``: 0; ``__share_group_state``: 0 snapshot, 1 update), a value's version is its own
message version. The ``api key`` column of a ``data`` block below is the record type its key is written with (as
Kafka 4's ``coordinator-key`` specs number them), or -1 where none is fixed.

Messages are dicts as everywhere in :mod:`pykbroker.protocol` (see :mod:`pykbroker.protocol.codec`). Pure functions,
no I/O; decoding raises :class:`RecordDecodeError` (a ValueError) on a short buffer or a version outside the
message's valid versions, encoding ProtocolEncodeError/UnsupportedVersionError as the codec does.
"""

from __future__ import annotations

from typing import Any

from pykbroker.protocol import codec
from pykbroker.protocol import types as t
from pykbroker.protocol.errors import UnsupportedVersionError
from pykbroker.protocol.schema import MessageSchema, parse_schemas
from pykbroker.protocol.types import ProtocolDecodeError

SCHEMAS = """
data OffsetCommitKey 1 0-1 flex=none
  group string 0+
  topic string 0+
  partition int32 0+

data OffsetCommitValue 1 0-4 flex=4+
  offset int64 0+
  leader_epoch int32 3+ =-1
  metadata string 0+
  commit_timestamp int64 0+
  expire_timestamp int64 1 =-1

data GroupMetadataKey 2 2 flex=none
  group string 2

data GroupMetadataValue 2 0-4 flex=4+
  protocol_type string 0+
  generation int32 0+
  protocol string 0+ null=0+
  leader string 0+ null=0+
  current_state_timestamp int64 2+ =-1
  members [] 0+
    member_id string 0+
    group_instance_id string 3+ null=3+ =null
    client_id string 0+
    client_host string 0+
    rebalance_timeout int32 1+ =-1
    session_timeout int32 0+
    subscription bytes 0+
    assignment bytes 0+

data ConsumerGroupMetadataKey 3 3 flex=none
  group_id string 3

data ConsumerGroupMetadataValue 3 0 flex=0+
  epoch int32 0+

data ConsumerGroupPartitionMetadataKey 4 4 flex=none
  group_id string 4

data ConsumerGroupPartitionMetadataValue 4 0 flex=0+
  topics [] 0+
    topic_id uuid 0+
    topic_name string 0+
    num_partitions int32 0+
    partition_metadata [] 0+
      partition int32 0+
      racks []string 0+

data ConsumerGroupMemberMetadataKey 5 5 flex=none
  group_id string 5
  member_id string 5

data ConsumerGroupMemberMetadataValue 5 0 flex=0+
  instance_id string 0+ null=0+
  rack_id string 0+ null=0+
  client_id string 0+
  client_host string 0+
  subscribed_topic_names []string 0+
  subscribed_topic_regex string 0+ null=0+
  rebalance_timeout_ms int32 0+ =-1
  server_assignor string 0+ null=0+
  classic_member_metadata {} 0+ null=0+ tag=0 =null
    session_timeout_ms int32 0+
    supported_protocols [] 0+
      name string 0+
      metadata bytes 0+

data ConsumerGroupTargetAssignmentMetadataKey 6 6 flex=none
  group_id string 6

data ConsumerGroupTargetAssignmentMetadataValue 6 0 flex=0+
  assignment_epoch int32 0+

data ConsumerGroupTargetAssignmentMemberKey 7 7 flex=none
  group_id string 7
  member_id string 7

data ConsumerGroupTargetAssignmentMemberValue 7 0 flex=0+
  topic_partitions [] 0+
    topic_id uuid 0+
    partitions []int32 0+

data ConsumerGroupCurrentMemberAssignmentKey 8 8 flex=none
  group_id string 8
  member_id string 8

data ConsumerGroupCurrentMemberAssignmentValue 8 0 flex=0+
  member_epoch int32 0+
  previous_member_epoch int32 0+
  state int8 0+
  assigned_partitions [] 0+
    topic_id uuid 0+
    partitions []int32 0+
  partitions_pending_revocation [] 0+
    topic_id uuid 0+
    partitions []int32 0+

data ShareGroupMemberMetadataKey 10 10 flex=none
  group_id string 10
  member_id string 10

data ShareGroupMemberMetadataValue 10 0 flex=0+
  rack_id string 0+ null=0+
  client_id string 0+
  client_host string 0+
  subscribed_topic_names []string 0+

data ShareGroupMetadataKey 11 11 flex=none
  group_id string 11

data ShareGroupMetadataValue 11 0 flex=0+
  epoch int32 0+

data ShareGroupTargetAssignmentMetadataKey 12 12 flex=none
  group_id string 12

data ShareGroupTargetAssignmentMetadataValue 12 0 flex=0+
  assignment_epoch int32 0+

data ShareGroupTargetAssignmentMemberKey 13 13 flex=none
  group_id string 13
  member_id string 13

data ShareGroupTargetAssignmentMemberValue 13 0 flex=0+
  topic_partitions [] 0+
    topic_id uuid 0+
    partitions []int32 0+

data ShareGroupCurrentMemberAssignmentKey 14 14 flex=none
  group_id string 14
  member_id string 14

data ShareGroupCurrentMemberAssignmentValue 14 0 flex=0+
  member_epoch int32 0+
  previous_member_epoch int32 0+
  state int8 0+
  assigned_partitions [] 0+
    topic_id uuid 0+
    partitions []int32 0+

data ShareGroupStatePartitionMetadataKey 15 15 flex=none
  group_id string 15

data ShareGroupStatePartitionMetadataValue 15 0 flex=0+
  initialized_topics [] 0+
    topic_id uuid 0+
    topic_name string 0+
    partitions []int32 0+
  deleting_topics [] 0+
    topic_id uuid 0+
    topic_name string 0+

data TransactionLogKey 0 0 flex=none
  transactional_id string 0

data TransactionLogValue 0 0-1 flex=1+
  producer_id int64 0+
  previous_producer_id int64 1+ tag=0 =-1
  next_producer_id int64 1+ tag=1 =-1
  producer_epoch int16 0+
  transaction_timeout_ms int32 0+
  transaction_status int8 0+
  transaction_partitions [] 0+ null=0+
    topic string 0+
    partition_ids []int32 0+
  transaction_last_update_timestamp_ms int64 0+
  transaction_start_timestamp_ms int64 0+
  client_transaction_version int16 1+ tag=2 =0

data ShareSnapshotKey 0 0 flex=none
  group_id string 0
  topic_id uuid 0
  partition int32 0

data ShareSnapshotValue 0 0 flex=0+
  snapshot_epoch uint16 0
  state_epoch int32 0+
  leader_epoch int32 0+
  start_offset int64 0
  delivery_complete_count int32 0+ tag=0 =-1
  state_batches [] 0
    first_offset int64 0
    last_offset int64 0
    delivery_state int8 0
    delivery_count int16 0

data ShareUpdateKey 1 1 flex=none
  group_id string 1
  topic_id uuid 1
  partition int32 1

data ShareUpdateValue 1 0 flex=0+
  snapshot_epoch uint16 0
  leader_epoch int32 0+
  start_offset int64 0
  delivery_complete_count int32 0+ tag=0 =-1
  state_batches [] 0
    first_offset int64 0
    last_offset int64 0
    delivery_state int8 0
    delivery_count int16 0
"""

RECORDS: dict[str, MessageSchema] = {s.name: s for s in parse_schemas(SCHEMAS)}


class RecordDecodeError(ValueError):
    """A coordinator record key or value that does not decode: truncated, malformed, or of a version outside its
    message's valid versions (Kafka's ``CoordinatorLoader.UnknownRecordTypeException`` / a ``RuntimeException``
    of ``readMessage``)."""


def encode_record(name: str, version: int, body: dict[str, Any]) -> bytes:
    """``int16 version`` + the ``name`` message at ``version``. Raises KeyError for an unknown name,
    UnsupportedVersionError for a version outside its valid versions, ProtocolEncodeError for bad values."""
    out = codec.Output(t.INT16.pack(version))
    codec.encode_into(out, RECORDS[name], version, body)  # no records fields: never a deferred region
    return bytes(out)


def read_version(buf: Any) -> int:
    """The ``int16`` version that starts a key or value; RecordDecodeError when there are fewer than 2 bytes."""
    if len(buf) < 2:
        raise RecordDecodeError("record truncated: no version")
    version: int = t.INT16.unpack_from(buf, 0)[0]
    return version


def decode_record(name: str, buf: Any) -> tuple[int, dict[str, Any]]:
    """``(version, message)`` of a key or value framed as ``int16 version`` + the ``name`` message (trailing bytes
    are ignored, as Kafka's readers do). Raises RecordDecodeError on a short or malformed buffer or a version outside
    the message's valid versions."""
    version = read_version(buf)
    try:
        message, _ = codec.decode(RECORDS[name], version, buf, 2)
    except (ProtocolDecodeError, UnsupportedVersionError) as e:
        raise RecordDecodeError(f"{name} version {version}: {e}") from None
    return version, message
