"""Produce (api key 0).

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request Produce 0 0-12 flex=9+
  transactional_id string 3+ null=3+ =null
  acks int16 0+
  timeout_ms int32 0+
  topic_data [] 0+
    name string 0+
    partition_data [] 0+
      index int32 0+
      records records 0+ null=0+

response Produce 0 0-12 flex=9+
  responses [] 0+
    name string 0+
    partition_responses [] 0+
      index int32 0+
      error_code int16 0+
      base_offset int64 0+
      log_append_time_ms int64 2+ =-1
      log_start_offset int64 5+ =-1
      record_errors [] 8+
        batch_index int32 8+
        batch_index_error_message string 8+ null=8+ =null
      error_message string 8+ null=8+ =null
      current_leader {} 10+ tag=0
        leader_id int32 10+ =-1
        leader_epoch int32 10+ =-1
  throttle_time_ms int32 1+ =0
  node_endpoints [] 10+ tag=0
    node_id int32 10+
    host string 10+
    port int32 10+
    rack string 10+ null=10+ =null
"""
