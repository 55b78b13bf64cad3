"""Committed offset APIs: OffsetCommit, OffsetFetch, OffsetDelete.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request OffsetCommit 8 0-10 flex=8+
  group_id string 0+
  generation_id_or_member_epoch int32 1+ =-1
  member_id string 1+
  group_instance_id string 7+ null=7+ =null
  retention_time_ms int64 2-4 =-1
  topics [] 0+
    name string 0-9
    topic_id uuid 10+
    partitions [] 0+
      partition_index int32 0+
      committed_offset int64 0+
      committed_leader_epoch int32 6+ =-1
      commit_timestamp int64 1 =-1
      committed_metadata string 0+ null=0+

response OffsetCommit 8 0-10 flex=8+
  throttle_time_ms int32 3+
  topics [] 0+
    name string 0-9
    topic_id uuid 10+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+

request OffsetFetch 9 0-10 flex=6+
  group_id string 0-7
  topics [] 0-7 null=2-7
    name string 0-7
    partition_indexes []int32 0-7
  groups [] 8+
    group_id string 8+
    member_id string 9+ null=9+ =null
    member_epoch int32 9+ =-1
    topics [] 8+ null=8+
      name string 8-9
      topic_id uuid 10+
      partition_indexes []int32 8+
  require_stable bool 7+ =false

response OffsetFetch 9 0-10 flex=6+
  throttle_time_ms int32 3+
  topics [] 0-7
    name string 0-7
    partitions [] 0-7
      partition_index int32 0-7
      committed_offset int64 0-7
      committed_leader_epoch int32 5-7 =-1
      metadata string 0-7 null=0-7
      error_code int16 0-7
  error_code int16 2-7 =0
  groups [] 8+
    group_id string 8+
    topics [] 8+
      name string 8-9
      topic_id uuid 10+
      partitions [] 8+
        partition_index int32 8+
        committed_offset int64 8+
        committed_leader_epoch int32 8+ =-1
        metadata string 8+ null=8+
        error_code int16 8+
    error_code int16 8+ =0

request OffsetDelete 47 0 flex=none
  group_id string 0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+

response OffsetDelete 47 0 flex=none
  error_code int16 0+
  throttle_time_ms int32 0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
"""
