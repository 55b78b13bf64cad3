"""Fetch (api key 1), used by consumers, follower replicas and Raft observers/voters.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request Fetch 1 0-18 flex=12+
  cluster_id string 12+ null=12+ tag=0 =null
  replica_id int32 0-14 =-1
  replica_state {} 15+ tag=1
    replica_id int32 15+ =-1
    replica_epoch int64 15+ =-1
  max_wait_ms int32 0+
  min_bytes int32 0+
  max_bytes int32 3+ =0x7fffffff
  isolation_level int8 4+ =0
  session_id int32 7+ =0
  session_epoch int32 7+ =-1
  topics [] 0+
    topic string 0-12
    topic_id uuid 13+
    partitions [] 0+
      partition int32 0+
      current_leader_epoch int32 9+ =-1
      fetch_offset int64 0+
      last_fetched_epoch int32 12+ =-1
      log_start_offset int64 5+ =-1
      partition_max_bytes int32 0+
      replica_directory_id uuid 17+ tag=0
      high_watermark int64 18+ tag=1 =0x7fffffffffffffff
  forgotten_topics_data [] 7+
    topic string 7-12
    topic_id uuid 13+
    partitions []int32 7+
  rack_id string 11+ =

response Fetch 1 0-18 flex=12+
  throttle_time_ms int32 1+
  error_code int16 7+
  session_id int32 7+ =0
  responses [] 0+
    topic string 0-12
    topic_id uuid 13+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      high_watermark int64 0+
      last_stable_offset int64 4+ =-1
      log_start_offset int64 5+ =-1
      diverging_epoch {} 12+ tag=0
        epoch int32 12+ =-1
        end_offset int64 12+ =-1
      current_leader {} 12+ tag=1
        leader_id int32 12+ =-1
        leader_epoch int32 12+ =-1
      snapshot_id {} 12+ tag=2
        end_offset int64 0+ =-1
        epoch int32 0+ =-1
      aborted_transactions [] 4+ null=4+
        producer_id int64 4+
        first_offset int64 4+
      preferred_read_replica int32 11+ =-1
      records records 0+ null=0+
  node_endpoints [] 16+ tag=0
    node_id int32 16+
    host string 16+
    port int32 16+
    rack string 16+ null=16+ =null
"""
