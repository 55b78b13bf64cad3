"""Classic consumer group membership APIs: FindCoordinator, JoinGroup, Heartbeat, LeaveGroup,
SyncGroup, DescribeGroups, ListGroups, DeleteGroups.

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request FindCoordinator 10 0-6 flex=3+
  key string 0-3
  key_type int8 1+ =0
  coordinator_keys []string 4+

response FindCoordinator 10 0-6 flex=3+
  throttle_time_ms int32 1+
  error_code int16 0-3
  error_message string 1-3 null=1-3
  node_id int32 0-3
  host string 0-3
  port int32 0-3
  coordinators [] 4+
    key string 4+
    node_id int32 4+
    host string 4+
    port int32 4+
    error_code int16 4+
    error_message string 4+ null=4+

request JoinGroup 11 0-9 flex=6+
  group_id string 0+
  session_timeout_ms int32 0+
  rebalance_timeout_ms int32 1+ =-1
  member_id string 0+
  group_instance_id string 5+ null=5+ =null
  protocol_type string 0+
  protocols [] 0+
    name string 0+
    metadata bytes 0+
  reason string 8+ null=8+ =null

response JoinGroup 11 0-9 flex=6+
  throttle_time_ms int32 2+
  error_code int16 0+
  generation_id int32 0+ =-1
  protocol_type string 7+ null=7+ =null
  protocol_name string 0+ null=7+
  leader string 0+
  skip_assignment bool 9+ =false
  member_id string 0+
  members [] 0+
    member_id string 0+
    group_instance_id string 5+ null=5+ =null
    metadata bytes 0+

request Heartbeat 12 0-4 flex=4+
  group_id string 0+
  generation_id int32 0+
  member_id string 0+
  group_instance_id string 3+ null=3+ =null

response Heartbeat 12 0-4 flex=4+
  throttle_time_ms int32 1+
  error_code int16 0+

request LeaveGroup 13 0-5 flex=4+
  group_id string 0+
  member_id string 0-2
  members [] 3+
    member_id string 3+
    group_instance_id string 3+ null=3+ =null
    reason string 5+ null=5+ =null

response LeaveGroup 13 0-5 flex=4+
  throttle_time_ms int32 1+
  error_code int16 0+
  members [] 3+
    member_id string 3+
    group_instance_id string 3+ null=3+
    error_code int16 3+

request SyncGroup 14 0-5 flex=4+
  group_id string 0+
  generation_id int32 0+
  member_id string 0+
  group_instance_id string 3+ null=3+ =null
  protocol_type string 5+ null=5+ =null
  protocol_name string 5+ null=5+ =null
  assignments [] 0+
    member_id string 0+
    assignment bytes 0+

response SyncGroup 14 0-5 flex=4+
  throttle_time_ms int32 1+
  error_code int16 0+
  protocol_type string 5+ null=5+ =null
  protocol_name string 5+ null=5+ =null
  assignment bytes 0+

request DescribeGroups 15 0-6 flex=5+
  groups []string 0+
  include_authorized_operations bool 3+

response DescribeGroups 15 0-6 flex=5+
  throttle_time_ms int32 1+
  groups [] 0+
    error_code int16 0+
    error_message string 6+ null=6+ =null
    group_id string 0+
    group_state string 0+
    protocol_type string 0+
    protocol_data string 0+
    members [] 0+
      member_id string 0+
      group_instance_id string 4+ null=4+ =null
      client_id string 0+
      client_host string 0+
      member_metadata bytes 0+
      member_assignment bytes 0+
    authorized_operations int32 3+ =-2147483648

request ListGroups 16 0-5 flex=3+
  states_filter []string 4+
  types_filter []string 5+

response ListGroups 16 0-5 flex=3+
  throttle_time_ms int32 1+
  error_code int16 0+
  groups [] 0+
    group_id string 0+
    protocol_type string 0+
    group_state string 4+
    group_type string 5+

request DeleteGroups 42 0-2 flex=2+
  groups_names []string 0+

response DeleteGroups 42 0-2 flex=2+
  throttle_time_ms int32 0+
  results [] 0+
    group_id string 0+
    error_code int16 0+
"""
