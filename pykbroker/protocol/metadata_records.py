"""KRaft metadata records (the values of ``__cluster_metadata`` records): schemas and their frame.

Mirrors ``org.apache.kafka.server.common.serialization.AbstractApiMessageSerde`` (``MetadataRecordSerde``) and the
record specs of Kafka's ``metadata`` module. A record value is::

    uvarint frame_version (1), uvarint api_key (the record type), uvarint version, message (flexible encoding)

Messages are dicts as everywhere in :mod:`pykbroker.protocol` (see :mod:`pykbroker.protocol.codec`).
"""

from __future__ import annotations

from typing import Any

from pykbroker.protocol import codec
from pykbroker.protocol import types as t
from pykbroker.protocol.schema import MessageSchema, parse_schemas
from pykbroker.protocol.types import ProtocolDecodeError

FRAME_VERSION = 1

SCHEMAS = """
metadata RegisterBrokerRecord 0 0-3 flex=0+
  broker_id int32 0+
  is_migrating_zk_broker bool 2+ =false
  incarnation_id uuid 0+
  broker_epoch int64 0+
  end_points [] 0+
    name string 0+
    host string 0+
    port uint16 0+
    security_protocol int16 0+
  features [] 0+
    name string 0+
    min_supported_version int16 0+
    max_supported_version int16 0+
  rack string 0+ null=0+
  fenced bool 0+ =true
  in_controlled_shutdown bool 1+ =false
  log_dirs []uuid 3+ tag=0

metadata UnregisterBrokerRecord 1 0 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+

metadata TopicRecord 2 0 flex=0+
  name string 0+
  topic_id uuid 0+

metadata PartitionRecord 3 0-2 flex=0+
  partition_id int32 0+ =-1
  topic_id uuid 0+
  replicas []int32 0+
  isr []int32 0+
  removing_replicas []int32 0+
  adding_replicas []int32 0+
  leader int32 0+ =-1
  leader_recovery_state int8 0+ tag=0 =0
  leader_epoch int32 0+ =-1
  partition_epoch int32 0+ =-1
  directories []uuid 1+
  eligible_leader_replicas []int32 2+ null=2+ tag=1 =null
  last_known_elr []int32 2+ null=2+ tag=2 =null

metadata ConfigRecord 4 0 flex=0+
  resource_type int8 0+
  resource_name string 0+
  name string 0+
  value string 0+ null=0+

metadata PartitionChangeRecord 5 0-2 flex=0+
  partition_id int32 0+ =-1
  topic_id uuid 0+
  isr []int32 0+ null=0+ tag=0 =null
  leader int32 0+ tag=1 =-2
  replicas []int32 0+ null=0+ tag=2 =null
  removing_replicas []int32 0+ null=0+ tag=3 =null
  adding_replicas []int32 0+ null=0+ tag=4 =null
  leader_recovery_state int8 0+ tag=5 =-1
  directories []uuid 1+ null=1+ tag=8 =null
  eligible_leader_replicas []int32 2+ null=2+ tag=6 =null
  last_known_elr []int32 2+ null=2+ tag=7 =null

metadata FenceBrokerRecord 7 0 flex=0+
  id int32 0+
  epoch int64 0+

metadata UnfenceBrokerRecord 8 0 flex=0+
  id int32 0+
  epoch int64 0+

metadata RemoveTopicRecord 9 0 flex=0+
  topic_id uuid 0+

metadata FeatureLevelRecord 12 0 flex=0+
  name string 0+
  feature_level int16 0+

metadata ProducerIdsRecord 15 0 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+ =-1
  next_producer_id int64 0+

metadata BrokerRegistrationChangeRecord 17 0-2 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+
  fenced int8 0+ tag=0
  in_controlled_shutdown int8 1+ tag=1
  log_dirs []uuid 2+ tag=2

metadata NoOpRecord 20 0 flex=0+

metadata UserScramCredentialRecord 11 0 flex=0+
  name string 0+
  mechanism int8 0+
  salt bytes 0+
  stored_key bytes 0+
  server_key bytes 0+
  iterations int32 0+

metadata ClientQuotaRecord 14 0 flex=0+
  entity [] 0+
    entity_type string 0+
    entity_name string 0+ null=0+
  key string 0+
  value float64 0+
  remove bool 0+

metadata AccessControlEntryRecord 18 0 flex=0+
  id uuid 0+
  resource_type int8 0+
  resource_name string 0+
  pattern_type int8 0+
  principal string 0+
  host string 0+
  operation int8 0+
  permission_type int8 0+

metadata RemoveAccessControlEntryRecord 19 0 flex=0+
  id uuid 0+

metadata RemoveUserScramCredentialRecord 22 0 flex=0+
  name string 0+
  mechanism int8 0+

metadata DelegationTokenRecord 10 0 flex=0+
  owner string 0+
  requester string 0+
  renewers []string 0+
  issue_timestamp int64 0+
  max_timestamp int64 0+
  expiration_timestamp int64 0+
  token_id string 0+

metadata RemoveDelegationTokenRecord 26 0 flex=0+
  token_id string 0+

"""

METADATA_RECORDS: dict[int, MessageSchema] = {s.api_key: s for s in parse_schemas(SCHEMAS)}
METADATA_RECORDS_BY_NAME: dict[str, MessageSchema] = {s.name: s for s in METADATA_RECORDS.values()}


def metadata_record_schema(name_or_key: str | int) -> MessageSchema:
    """The schema of a record type, by name (``"TopicRecord"``) or api key (``2``); KeyError when unknown."""
    if isinstance(name_or_key, str):
        return METADATA_RECORDS_BY_NAME[name_or_key]
    return METADATA_RECORDS[name_or_key]


def encode_metadata_record(name_or_key: str | int, version: int, record: dict) -> bytes:
    """The framed value of one metadata record (frame version 1). Raises KeyError for an unknown record type,
    UnsupportedVersionError for a version outside its valid versions, ProtocolEncodeError for bad values."""
    schema = metadata_record_schema(name_or_key)
    frame = bytearray()
    t.write_uvarint(frame, FRAME_VERSION)
    t.write_uvarint(frame, schema.api_key)
    t.write_uvarint(frame, version)
    return codec.encode(schema, version, record, header=bytes(frame))


def decode_metadata_record(buf: Any) -> tuple[str, int, dict]:
    """``(record type name, version, record dict)`` from a framed value. The value must be exactly one record:
    an unknown frame version or type, a bad version, trailing bytes or malformed data raise ProtocolDecodeError."""
    mv = codec.as_byte_view(buf)
    frame_version, pos = t.read_uvarint(mv, 0)
    if frame_version != FRAME_VERSION:
        raise ProtocolDecodeError(f"unknown metadata record frame version {frame_version}")
    key, pos = t.read_uvarint(mv, pos)
    version, pos = t.read_uvarint(mv, pos)
    schema = METADATA_RECORDS.get(key)
    if schema is None:
        raise ProtocolDecodeError(f"unknown metadata record type {key}")
    if version not in schema.valid_versions:
        raise ProtocolDecodeError(f"{schema.name} version {version} is outside {schema.valid_versions}")
    record, end = codec.decode(schema, version, mv, pos)
    if end != len(mv):
        raise ProtocolDecodeError(f"{len(mv) - end} byte(s) of garbage after {schema.name}")
    return schema.name, version, record
