"""Topic admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request CreateTopics 19 0-7 flex=5+
  topics [] 0+
    name string 0+
    num_partitions int32 0+
    replication_factor int16 0+
    assignments [] 0+
      partition_index int32 0+
      broker_ids []int32 0+
    configs [] 0+
      name string 0+
      value string 0+ null=0+
  timeout_ms int32 0+ =60000
  validate_only bool 1+ =false

response CreateTopics 19 0-7 flex=5+
  throttle_time_ms int32 2+
  topics [] 0+
    name string 0+
    topic_id uuid 7+
    error_code int16 0+
    error_message string 1+ null=0+
    topic_config_error_code int16 5+ tag=0
    num_partitions int32 5+ =-1
    replication_factor int16 5+ =-1
    configs [] 5+ null=5+
      name string 5+
      value string 5+ null=5+
      read_only bool 5+
      config_source int8 5+ =-1
      is_sensitive bool 5+

request DeleteTopics 20 0-6 flex=4+
  topics [] 6+
    name string 6+ null=6+ =null
    topic_id uuid 6+
  topic_names []string 0-5
  timeout_ms int32 0+

response DeleteTopics 20 0-6 flex=4+
  throttle_time_ms int32 1+
  responses [] 0+
    name string 0+ null=6+
    topic_id uuid 6+
    error_code int16 0+
    error_message string 5+ null=5+ =null

request CreatePartitions 37 0-3 flex=2+
  topics [] 0+
    name string 0+
    count int32 0+
    assignments [] 0+ null=0+
      broker_ids []int32 0+
  timeout_ms int32 0+
  validate_only bool 0+

response CreatePartitions 37 0-3 flex=2+
  throttle_time_ms int32 0+
  results [] 0+
    name string 0+
    error_code int16 0+
    error_message string 0+ null=0+ =null

request DescribeTopicPartitions 75 0 flex=0+
  topics [] 0+
    name string 0+
  response_partition_limit int32 0+ =2000
  cursor {} 0+ null=0+ =null
    topic_name string 0+
    partition_index int32 0+

response DescribeTopicPartitions 75 0 flex=0+
  throttle_time_ms int32 0+
  topics [] 0+
    error_code int16 0+
    name string 0+ null=0+
    topic_id uuid 0+
    is_internal bool 0+ =false
    partitions [] 0+
      error_code int16 0+
      partition_index int32 0+
      leader_id int32 0+
      leader_epoch int32 0+ =-1
      replica_nodes []int32 0+
      isr_nodes []int32 0+
      eligible_leader_replicas []int32 0+ null=0+ =null
      last_known_elr []int32 0+ null=0+ =null
      offline_replicas []int32 0+
    topic_authorized_operations int32 0+ =-2147483648
  next_cursor {} 0+ null=0+ =null
    topic_name string 0+
    partition_index int32 0+
"""
