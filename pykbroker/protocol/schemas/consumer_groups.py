"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat, ConsumerGroupDescribe.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts (Kafka 4.0's
JSON specs: Heartbeat v1 adds SubscribedTopicRegex, Describe v1 adds MemberType, KIP-1099).
"""

SCHEMAS = """
request ConsumerGroupHeartbeat 68 0-1 flex=0+
  group_id string 0+
  member_id string 0+
  member_epoch int32 0+
  instance_id string 0+ null=0+ =null
  rack_id string 0+ null=0+ =null
  rebalance_timeout_ms int32 0+ =-1
  subscribed_topic_names []string 0+ null=0+ =null
  subscribed_topic_regex string 1+ null=1+ =null
  server_assignor string 0+ null=0+ =null
  topic_partitions [] 0+ null=0+ =null
    topic_id uuid 0+
    partitions []int32 0+

response ConsumerGroupHeartbeat 68 0-1 flex=0+
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

request ConsumerGroupDescribe 69 0-1 flex=0+
  group_ids []string 0+
  include_authorized_operations bool 0+

response ConsumerGroupDescribe 69 0-1 flex=0+
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
      instance_id string 0+ null=0+ =null
      rack_id string 0+ null=0+ =null
      member_epoch int32 0+
      client_id string 0+
      client_host string 0+
      subscribed_topic_names []string 0+
      subscribed_topic_regex string 0+ null=0+ =null
      assignment {} 0+
        topic_partitions [] 0+
          topic_id uuid 0+
          topic_name string 0+
          partitions []int32 0+
      target_assignment {} 0+
        topic_partitions [] 0+
          topic_id uuid 0+
          topic_name string 0+
          partitions []int32 0+
      member_type int8 1+ =-1
    authorized_operations int32 0+ =-2147483648
"""
