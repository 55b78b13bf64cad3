"""KIP-932 share group APIs of the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe, and the admin offsets
APIs DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts: Kafka 4.1/4.2
serve ShareGroupHeartbeat and ShareGroupDescribe from version 1 (v0 was 4.0's early access, removed), as librdkafka
2.16's ``ShareConsumer`` sends them (``rd_kafka_ShareGroupHeartbeatRequest``: v1 only). The admin offsets APIs are
Kafka 4.1's version 0, and Kafka 4.2's DescribeShareGroupOffsets v1 (the share-partition ``lag``, KIP-1226).
"""

SCHEMAS = """
request ShareGroupHeartbeat 76 1-1 flex=0+
  group_id string 0+
  member_id string 0+
  member_epoch int32 0+
  rack_id string 0+ null=0+ =null
  subscribed_topic_names []string 0+ null=0+ =null

response ShareGroupHeartbeat 76 1-1 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+ =null
  member_id string 0+ null=0+ =null
  member_epoch int32 0+
  heartbeat_interval_ms int32 0+
  assignment {} 0+ null=0+ =null
    topic_partitions [] 0+
      topic_id uuid 0+
      partitions []int32 0+

request ShareGroupDescribe 77 1-1 flex=0+
  group_ids []string 0+
  include_authorized_operations bool 0+

response ShareGroupDescribe 77 1-1 flex=0+
  throttle_time_ms int32 0+
  groups [] 0+
    error_code int16 0+
    error_message string 0+ null=0+ =null
    group_id string 0+
    group_state string 0+
    group_epoch int32 0+
    assignment_epoch int32 0+
    assignor_name string 0+
    members [] 0+
      member_id string 0+
      rack_id string 0+ null=0+ =null
      member_epoch int32 0+
      client_id string 0+
      client_host string 0+
      subscribed_topic_names []string 0+
      assignment {} 0+
        topic_partitions [] 0+
          topic_id uuid 0+
          topic_name string 0+
          partitions []int32 0+
    authorized_operations int32 0+ =-2147483648

request DescribeShareGroupOffsets 90 0-1 flex=0+
  groups [] 0+
    group_id string 0+
    topics [] 0+ null=0+
      topic_name string 0+
      partitions []int32 0+

response DescribeShareGroupOffsets 90 0-1 flex=0+
  throttle_time_ms int32 0+
  groups [] 0+
    group_id string 0+
    topics [] 0+
      topic_name string 0+
      topic_id uuid 0+
      partitions [] 0+
        partition_index int32 0+
        start_offset int64 0+
        leader_epoch int32 0+
        lag int64 1+ =-1
        error_code int16 0+
        error_message string 0+ null=0+ =null
    error_code int16 0+
    error_message string 0+ null=0+ =null

request AlterShareGroupOffsets 91 0 flex=0+
  group_id string 0+
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      start_offset int64 0+

response AlterShareGroupOffsets 91 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+ =null
  responses [] 0+
    topic_name string 0+
    topic_id uuid 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null

request DeleteShareGroupOffsets 92 0 flex=0+
  group_id string 0+
  topics [] 0+
    topic_name string 0+

response DeleteShareGroupOffsets 92 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+ =null
  responses [] 0+
    topic_name string 0+
    topic_id uuid 0+
    error_code int16 0+
    error_message string 0+ null=0+ =null
"""
