"""Producer id and transaction APIs: InitProducerId, AddPartitionsToTxn, DescribeProducers.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request InitProducerId 22 0-5 flex=2+
  transactional_id string 0+ null=0+
  transaction_timeout_ms int32 0+
  producer_id int64 3+ =-1
  producer_epoch int16 3+ =-1

response InitProducerId 22 0-5 flex=2+
  throttle_time_ms int32 0+
  error_code int16 0+
  producer_id int64 0+ =-1
  producer_epoch int16 0+

request AddPartitionsToTxn 24 0-5 flex=3+
  transactions [] 4+
    transactional_id string 4+
    producer_id int64 4+
    producer_epoch int16 4+
    verify_only bool 4+ =false
    topics [] 4+
      name string 0+
      partitions []int32 0+
  v3_and_below_transactional_id string 0-3
  v3_and_below_producer_id int64 0-3
  v3_and_below_producer_epoch int16 0-3
  v3_and_below_topics [] 0-3
    name string 0+
    partitions []int32 0+

response AddPartitionsToTxn 24 0-5 flex=3+
  throttle_time_ms int32 0+
  error_code int16 4+
  results_by_transaction [] 4+
    transactional_id string 4+
    topic_results [] 4+
      name string 0+
      results_by_partition [] 0+
        partition_index int32 0+
        partition_error_code int16 0+
  results_by_topic_v3_and_below [] 0-3
    name string 0+
    results_by_partition [] 0+
      partition_index int32 0+
      partition_error_code int16 0+

request DescribeProducers 61 0 flex=0+
  topics [] 0+
    name string 0+
    partition_indexes []int32 0+

response DescribeProducers 61 0 flex=0+
  throttle_time_ms int32 0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      error_message string 0+ null=0+ =null
      active_producers [] 0+
        producer_id int64 0+
        producer_epoch int32 0+
        last_sequence int32 0+ =-1
        last_timestamp int64 0+ =-1
        coordinator_epoch int32 0+
        current_txn_start_offset int64 0+ =-1
"""
