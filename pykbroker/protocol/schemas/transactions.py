"""Producer id and transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions.

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

request AddOffsetsToTxn 25 0-4 flex=3+
  transactional_id string 0+
  producer_id int64 0+
  producer_epoch int16 0+
  group_id string 0+

response AddOffsetsToTxn 25 0-4 flex=3+
  throttle_time_ms int32 0+
  error_code int16 0+

request EndTxn 26 0-5 flex=3+
  transactional_id string 0+
  producer_id int64 0+
  producer_epoch int16 0+
  committed bool 0+

response EndTxn 26 0-5 flex=3+
  throttle_time_ms int32 0+
  error_code int16 0+
  producer_id int64 5+ =-1
  producer_epoch int16 5+ =-1

request WriteTxnMarkers 27 0-1 flex=1+
  markers [] 0+
    producer_id int64 0+
    producer_epoch int16 0+
    transaction_result bool 0+
    topics [] 0+
      name string 0+
      partition_indexes []int32 0+
    coordinator_epoch int32 0+

response WriteTxnMarkers 27 0-1 flex=1+
  markers [] 0+
    producer_id int64 0+
    topics [] 0+
      name string 0+
      partitions [] 0+
        partition_index int32 0+
        error_code int16 0+

request TxnOffsetCommit 28 0-5 flex=3+
  transactional_id string 0+
  group_id string 0+
  producer_id int64 0+
  producer_epoch int16 0+
  generation_id int32 3+ =-1
  member_id string 3+ =
  group_instance_id string 3+ null=3+ =null
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      committed_offset int64 0+
      committed_leader_epoch int32 2+ =-1
      committed_metadata string 0+ null=0+

response TxnOffsetCommit 28 0-5 flex=3+
  throttle_time_ms int32 0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+

request DescribeTransactions 65 0 flex=0+
  transactional_ids []string 0+

response DescribeTransactions 65 0 flex=0+
  throttle_time_ms int32 0+
  transaction_states [] 0+
    error_code int16 0+
    transactional_id string 0+
    transaction_state string 0+
    transaction_timeout_ms int32 0+
    transaction_start_time_ms int64 0+
    producer_id int64 0+
    producer_epoch int16 0+
    topics [] 0+
      topic string 0+
      partitions []int32 0+

request ListTransactions 66 0-2 flex=0+
  state_filters []string 0+
  producer_id_filters []int64 0+
  duration_filter int64 1+ =-1
  transactional_id_pattern string 2+ null=2+ =null

response ListTransactions 66 0-2 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  unknown_state_filters []string 0+
  transaction_states [] 0+
    transactional_id string 0+
    producer_id int64 0+
    transaction_state string 0+
"""
