"""KRaft controller-plane APIs: Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum, FetchSnapshot, AddRaftVoter,
RemoveRaftVoter, UpdateRaftVoter (KIP-853), BrokerRegistration, BrokerHeartbeat, UnregisterBroker,
AssignReplicasToDirs (KIP-858), AllocateProducerIds, Envelope (KIP-590: a request a broker forwards with its client's
principal and address).

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request Vote 52 0-2 flex=0+
  cluster_id string 0+ null=0+ =null
  voter_id int32 1+ =-1
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      candidate_epoch int32 0+
      candidate_id int32 0+
      candidate_directory_id uuid 1+
      voter_directory_id uuid 1+
      last_offset_epoch int32 0+
      last_offset int64 0+
      pre_vote bool 2+

response Vote 52 0-2 flex=0+
  error_code int16 0+
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      leader_id int32 0+
      leader_epoch int32 0+
      vote_granted bool 0+
  node_endpoints [] 1+ tag=0
    node_id int32 1+
    host string 1+
    port uint16 1+

request BeginQuorumEpoch 53 0-1 flex=1+
  cluster_id string 0+ null=0+ =null
  voter_id int32 1+ =-1
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      voter_directory_id uuid 1+
      leader_id int32 0+
      leader_epoch int32 0+
  leader_endpoints [] 1+
    name string 1+
    host string 1+
    port uint16 1+

response BeginQuorumEpoch 53 0-1 flex=1+
  error_code int16 0+
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      leader_id int32 0+
      leader_epoch int32 0+
  node_endpoints [] 1+ tag=0
    node_id int32 1+
    host string 1+
    port uint16 1+

request EndQuorumEpoch 54 0-1 flex=1+
  cluster_id string 0+ null=0+ =null
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      leader_id int32 0+
      leader_epoch int32 0+
      preferred_successors []int32 0
      preferred_candidates [] 1+
        candidate_id int32 1+
        candidate_directory_id uuid 1+
  leader_endpoints [] 1+
    name string 1+
    host string 1+
    port uint16 1+

response EndQuorumEpoch 54 0-1 flex=1+
  error_code int16 0+
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      leader_id int32 0+
      leader_epoch int32 0+
  node_endpoints [] 1+ tag=0
    node_id int32 1+
    host string 1+
    port uint16 1+

request DescribeQuorum 55 0-2 flex=0+
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+

response DescribeQuorum 55 0-2 flex=0+
  error_code int16 0+
  error_message string 2+ null=2+
  topics [] 0+
    topic_name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      error_message string 2+ null=2+
      leader_id int32 0+
      leader_epoch int32 0+
      high_watermark int64 0+
      current_voters [] 0+
        replica_id int32 0+
        replica_directory_id uuid 2+
        log_end_offset int64 0+
        last_fetch_timestamp int64 1+ =-1
        last_caught_up_timestamp int64 1+ =-1
      observers [] 0+
        replica_id int32 0+
        replica_directory_id uuid 2+
        log_end_offset int64 0+
        last_fetch_timestamp int64 1+ =-1
        last_caught_up_timestamp int64 1+ =-1
  nodes [] 2+
    node_id int32 2+
    listeners [] 2+
      name string 2+
      host string 2+
      port uint16 2+

request FetchSnapshot 59 0-1 flex=0+
  cluster_id string 0+ null=0+ tag=0 =null
  replica_id int32 0+ =-1
  max_bytes int32 0+ =0x7fffffff
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition int32 0+
      current_leader_epoch int32 0+
      snapshot_id {} 0+
        end_offset int64 0+
        epoch int32 0+
      position int64 0+
      replica_directory_id uuid 1+ tag=0

response FetchSnapshot 59 0-1 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      index int32 0+
      error_code int16 0+
      snapshot_id {} 0+
        end_offset int64 0+
        epoch int32 0+
      current_leader {} 0+ tag=0
        leader_id int32 0+
        leader_epoch int32 0+
      size int64 0+
      position int64 0+
      unaligned_records records 0+
  node_endpoints [] 1+ tag=0
    node_id int32 1+
    host string 1+
    port uint16 1+

request BrokerRegistration 62 0-4 flex=0+
  broker_id int32 0+
  cluster_id string 0+
  incarnation_id uuid 0+
  listeners [] 0+
    name string 0+
    host string 0+
    port uint16 0+
    security_protocol int16 0+
  features [] 0+
    name string 0+
    min_supported_version int16 0+
    max_supported_version int16 0+
  rack string 0+ null=0+
  is_migrating_zk_broker bool 1+ =false
  log_dirs []uuid 2+
  previous_broker_epoch int64 3+ =-1

response BrokerRegistration 62 0-4 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  broker_epoch int64 0+ =-1

request BrokerHeartbeat 63 0-1 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+ =-1
  current_metadata_offset int64 0+
  want_fence bool 0+
  want_shut_down bool 0+
  offline_log_dirs []uuid 1+ tag=0

response BrokerHeartbeat 63 0-1 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  is_caught_up bool 0+ =false
  is_fenced bool 0+ =true
  should_shut_down bool 0+

request UnregisterBroker 64 0 flex=0+
  broker_id int32 0+

response UnregisterBroker 64 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+

request AssignReplicasToDirs 73 0 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+ =-1
  directories [] 0+
    id uuid 0+
    topics [] 0+
      topic_id uuid 0+
      partitions [] 0+
        partition_index int32 0+

response AssignReplicasToDirs 73 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  directories [] 0+
    id uuid 0+
    topics [] 0+
      topic_id uuid 0+
      partitions [] 0+
        partition_index int32 0+
        error_code int16 0+

request AllocateProducerIds 67 0 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+

response AllocateProducerIds 67 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  producer_id_start int64 0+
  producer_id_len int32 0+

request Envelope 58 0 flex=0+
  request_data bytes 0+
  request_principal bytes 0+ null=0+
  client_host_address bytes 0+

response Envelope 58 0 flex=0+
  response_data bytes 0+ null=0+ =null
  error_code int16 0+

request AddRaftVoter 80 0 flex=0+
  cluster_id string 0+ null=0+
  timeout_ms int32 0+
  voter_id int32 0+
  voter_directory_id uuid 0+
  listeners [] 0+
    name string 0+
    host string 0+
    port uint16 0+

response AddRaftVoter 80 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+

request RemoveRaftVoter 81 0 flex=0+
  cluster_id string 0+ null=0+
  voter_id int32 0+
  voter_directory_id uuid 0+

response RemoveRaftVoter 81 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+

request UpdateRaftVoter 82 0 flex=0+
  cluster_id string 0+ null=0+
  current_leader_epoch int32 0+
  voter_id int32 0+
  voter_directory_id uuid 0+
  listeners [] 0+
    name string 0+
    host string 0+
    port uint16 0+
  k_raft_version_feature {} 0+
    min_supported_version int16 0+
    max_supported_version int16 0+

response UpdateRaftVoter 82 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  current_leader {} 0+ tag=0
    leader_id int32 0+ =-1
    leader_epoch int32 0+ =-1
    host string 0+
    port int32 0+
"""
