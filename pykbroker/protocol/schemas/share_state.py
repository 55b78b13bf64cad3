"""Share group state APIs (KIP-932), spoken between brokers only: the share partition's leader (its Persister)
to the share coordinator. InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85,
DeleteShareGroupState 86, ReadShareGroupStateSummary 87.

Kafka's ``clients/src/main/resources/common/message/*ShareGroupState*.json`` (flexible; Kafka 4.2's v1 of
WriteShareGroupState and ReadShareGroupStateSummary add ``delivery_complete_count``, KIP-1226: the offsets at or
above the start offset whose delivery is complete, -1 when unknown). Schema DSL: see
:mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request InitializeShareGroupState 83 0 flex=0+
  group_id string 0+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      state_epoch int32 0+
      start_offset int64 0+

response InitializeShareGroupState 83 0 flex=0+
  results [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null

request ReadShareGroupState 84 0 flex=0+
  group_id string 0+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      leader_epoch int32 0+

response ReadShareGroupState 84 0 flex=0+
  results [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null
      state_epoch int32 0+
      start_offset int64 0+
      state_batches [] 0+
        first_offset int64 0+
        last_offset int64 0+
        delivery_state int8 0+
        delivery_count int16 0+

request WriteShareGroupState 85 0-1 flex=0+
  group_id string 0+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      state_epoch int32 0+
      leader_epoch int32 0+
      start_offset int64 0+
      delivery_complete_count int32 1+ =-1
      state_batches [] 0+
        first_offset int64 0+
        last_offset int64 0+
        delivery_state int8 0+
        delivery_count int16 0+

response WriteShareGroupState 85 0-1 flex=0+
  results [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null

request DeleteShareGroupState 86 0 flex=0+
  group_id string 0+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+

response DeleteShareGroupState 86 0 flex=0+
  results [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null

request ReadShareGroupStateSummary 87 0-1 flex=0+
  group_id string 0+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      leader_epoch int32 0+

response ReadShareGroupStateSummary 87 0-1 flex=0+
  results [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null
      state_epoch int32 0+
      leader_epoch int32 0+
      start_offset int64 0+
      delivery_complete_count int32 1+ =-1
"""
