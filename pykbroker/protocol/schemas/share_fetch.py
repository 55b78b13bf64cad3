"""KIP-932 share-group data path: ShareFetch (78) and ShareAcknowledge (79).

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts: Kafka 4.1+'s
JSON specs, whose v1 is the first stable version (v0 was Kafka 4.0's early access; v1 drops the per-partition
``PartitionMaxBytes`` and adds ``MaxRecords``, ``BatchSize`` and ``AcquisitionLockTimeoutMs``). librdkafka 2.16
(``rd_kafka_ShareFetchRequest`` / ``rd_kafka_ShareAcknowledgeRequest``) writes and reads v1 only.
"""

SCHEMAS = """
request ShareFetch 78 1 flex=0+
  group_id string 0+ null=0+ =null
  member_id string 0+ null=0+
  share_session_epoch int32 0+
  max_wait_ms int32 0+
  min_bytes int32 0+
  max_bytes int32 0+ =0x7fffffff
  max_records int32 1+
  batch_size int32 1+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition_index int32 0+
      partition_max_bytes int32 0
      acknowledgement_batches [] 0+
        first_offset int64 0+
        last_offset int64 0+
        acknowledge_types []int8 0+
  forgotten_topics_data [] 0+
    topic_id uuid 0+
    partitions []int32 0+

response ShareFetch 78 1 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+ =null
  acquisition_lock_timeout_ms int32 1+
  responses [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null
      acknowledge_error_code int16 0+
      acknowledge_error_message string 0+ null=0+ =null
      current_leader {} 0+
        leader_id int32 0+ =-1
        leader_epoch int32 0+ =-1
      records records 0+ null=0+
      acquired_records [] 0+
        first_offset int64 0+
        last_offset int64 0+
        delivery_count int16 0+
  node_endpoints [] 0+
    node_id int32 0+
    host string 0+
    port int32 0+
    rack string 0+ null=0+ =null

request ShareAcknowledge 79 1 flex=0+
  group_id string 0+ null=0+ =null
  member_id string 0+ null=0+
  share_session_epoch int32 0+
  topics [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition_index int32 0+
      acknowledgement_batches [] 0+
        first_offset int64 0+
        last_offset int64 0+
        acknowledge_types []int8 0+

response ShareAcknowledge 79 1 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+ =null
  responses [] 0+
    topic_id uuid 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null
      current_leader {} 0+
        leader_id int32 0+ =-1
        leader_epoch int32 0+ =-1
  node_endpoints [] 0+
    node_id int32 0+
    host string 0+
    port int32 0+
    rack string 0+ null=0+ =null
"""
