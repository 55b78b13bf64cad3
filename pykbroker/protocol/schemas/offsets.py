"""Partition offset APIs: ListOffsets, OffsetForLeaderEpoch, DeleteRecords.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request ListOffsets 2 0-10 flex=6+
  replica_id int32 0+
  isolation_level int8 2+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      current_leader_epoch int32 4+ =-1
      timestamp int64 0+
      max_num_offsets int32 0 =1
  timeout_ms int32 10+

response ListOffsets 2 0-10 flex=6+
  throttle_time_ms int32 2+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      old_style_offsets []int64 0
      timestamp int64 1+ =-1
      offset int64 1+ =-1
      leader_epoch int32 4+ =-1

request OffsetForLeaderEpoch 23 0-4 flex=4+
  replica_id int32 3+ =-2
  topics [] 0+
    topic string 0+
    partitions [] 0+
      partition int32 0+
      current_leader_epoch int32 2+ =-1
      leader_epoch int32 0+

response OffsetForLeaderEpoch 23 0-4 flex=4+
  throttle_time_ms int32 2+
  topics [] 0+
    topic string 0+
    partitions [] 0+
      error_code int16 0+
      partition int32 0+
      leader_epoch int32 1+ =-1
      end_offset int64 0+ =-1

request DeleteRecords 21 0-2 flex=2+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      offset int64 0+
  timeout_ms int32 0+

response DeleteRecords 21 0-2 flex=2+
  throttle_time_ms int32 0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      low_watermark int64 0+
      error_code int16 0+
"""
