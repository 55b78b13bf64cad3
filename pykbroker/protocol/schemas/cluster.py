"""Cluster-level APIs: ApiVersions, Metadata, DescribeCluster, UpdateFeatures, SASL handshake/authenticate,
delegation tokens (KIP-48: CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken, DescribeDelegationToken).

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request ApiVersions 18 0-4 flex=3+
  client_software_name string 3+
  client_software_version string 3+

response ApiVersions 18 0-4 flex=3+
  error_code int16 0+
  api_keys [] 0+
    api_key int16 0+
    min_version int16 0+
    max_version int16 0+
  throttle_time_ms int32 1+
  supported_features [] 3+ tag=0
    name string 3+
    min_version int16 3+
    max_version int16 3+
  finalized_features_epoch int64 3+ tag=1 =-1
  finalized_features [] 3+ tag=2
    name string 3+
    max_version_level int16 3+
    min_version_level int16 3+
  zk_migration_ready bool 3+ tag=3 =false

request Metadata 3 0-13 flex=9+
  topics [] 0+ null=1+
    topic_id uuid 10+
    name string 0+ null=10+
  allow_auto_topic_creation bool 4+ =true
  include_cluster_authorized_operations bool 8-10
  include_topic_authorized_operations bool 8+

response Metadata 3 0-13 flex=9+
  throttle_time_ms int32 3+
  brokers [] 0+
    node_id int32 0+
    host string 0+
    port int32 0+
    rack string 1+ null=1+ =null
  cluster_id string 2+ null=2+ =null
  controller_id int32 1+ =-1
  topics [] 0+
    error_code int16 0+
    name string 0+ null=12+
    topic_id uuid 10+
    is_internal bool 1+ =false
    partitions [] 0+
      error_code int16 0+
      partition_index int32 0+
      leader_id int32 0+
      leader_epoch int32 7+ =-1
      replica_nodes []int32 0+
      isr_nodes []int32 0+
      offline_replicas []int32 5+
    topic_authorized_operations int32 8+ =-2147483648
  cluster_authorized_operations int32 8-10 =-2147483648
  error_code int16 13+

request DescribeCluster 60 0-2 flex=0+
  include_cluster_authorized_operations bool 0+
  endpoint_type int8 1+ =1
  include_fenced_brokers bool 2+

response DescribeCluster 60 0-2 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+ =null
  endpoint_type int8 1+ =1
  cluster_id string 0+
  controller_id int32 0+ =-1
  brokers [] 0+
    broker_id int32 0+
    host string 0+
    port int32 0+
    rack string 0+ null=0+ =null
    is_fenced bool 2+
  cluster_authorized_operations int32 0+ =-2147483648

request UpdateFeatures 57 0-2 flex=0+
  timeout_ms int32 0+ =60000
  feature_updates [] 0+
    feature string 0+
    max_version_level int16 0+
    allow_downgrade bool 0
    upgrade_type int8 1+ =1
  validate_only bool 1+ =false

response UpdateFeatures 57 0-2 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+
  results [] 0-1
    feature string 0+
    error_code int16 0+
    error_message string 0+ null=0+

request SaslHandshake 17 0-1 flex=none
  mechanism string 0+

response SaslHandshake 17 0-1 flex=none
  error_code int16 0+
  mechanisms []string 0+

request SaslAuthenticate 36 0-2 flex=2+
  auth_bytes bytes 0+

response SaslAuthenticate 36 0-2 flex=2+
  error_code int16 0+
  error_message string 0+ null=0+
  auth_bytes bytes 0+
  session_lifetime_ms int64 1+ =0

request DescribeUserScramCredentials 50 0 flex=0+
  users [] 0+ null=0+
    name string 0+

response DescribeUserScramCredentials 50 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+
  results [] 0+
    user string 0+
    error_code int16 0+
    error_message string 0+ null=0+
    credential_infos [] 0+
      mechanism int8 0+
      iterations int32 0+

request AlterUserScramCredentials 51 0 flex=0+
  deletions [] 0+
    name string 0+
    mechanism int8 0+
  upsertions [] 0+
    name string 0+
    mechanism int8 0+
    iterations int32 0+
    salt bytes 0+
    salted_password bytes 0+

response AlterUserScramCredentials 51 0 flex=0+
  throttle_time_ms int32 0+
  results [] 0+
    user string 0+
    error_code int16 0+
    error_message string 0+ null=0+

request CreateDelegationToken 38 0-3 flex=2+
  owner_principal_type string 3+ null=3+
  owner_principal_name string 3+ null=3+
  renewers [] 0+
    principal_type string 0+
    principal_name string 0+
  max_lifetime_ms int64 0+

response CreateDelegationToken 38 0-3 flex=2+
  error_code int16 0+
  principal_type string 0+
  principal_name string 0+
  token_requester_principal_type string 3+
  token_requester_principal_name string 3+
  issue_timestamp_ms int64 0+
  expiry_timestamp_ms int64 0+
  max_timestamp_ms int64 0+
  token_id string 0+
  hmac bytes 0+
  throttle_time_ms int32 0+

request RenewDelegationToken 39 0-2 flex=2+
  hmac bytes 0+
  renew_period_ms int64 0+

response RenewDelegationToken 39 0-2 flex=2+
  error_code int16 0+
  expiry_timestamp_ms int64 0+
  throttle_time_ms int32 0+

request ExpireDelegationToken 40 0-2 flex=2+
  hmac bytes 0+
  expiry_time_period_ms int64 0+

response ExpireDelegationToken 40 0-2 flex=2+
  error_code int16 0+
  expiry_timestamp_ms int64 0+
  throttle_time_ms int32 0+

request DescribeDelegationToken 41 0-3 flex=2+
  owners [] 0+ null=0+
    principal_type string 0+
    principal_name string 0+

response DescribeDelegationToken 41 0-3 flex=2+
  error_code int16 0+
  tokens [] 0+
    principal_type string 0+
    principal_name string 0+
    token_requester_principal_type string 3+
    token_requester_principal_name string 3+
    issue_timestamp int64 0+
    expiry_timestamp int64 0+
    max_timestamp int64 0+
    token_id string 0+
    hmac bytes 0+
    renewers [] 0+
      principal_type string 0+
      principal_name string 0+
  throttle_time_ms int32 0+

request DescribeAcls 29 1-3 flex=2+
  resource_type_filter int8 0+
  resource_name_filter string 0+ null=0+
  pattern_type_filter int8 1+ =3
  principal_filter string 0+ null=0+
  host_filter string 0+ null=0+
  operation int8 0+
  permission_type int8 0+

response DescribeAcls 29 1-3 flex=2+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+
  resources [] 0+
    resource_type int8 0+
    resource_name string 0+
    pattern_type int8 1+ =3
    acls [] 0+
      principal string 0+
      host string 0+
      operation int8 0+
      permission_type int8 0+

request CreateAcls 30 1-3 flex=2+
  creations [] 0+
    resource_type int8 0+
    resource_name string 0+
    resource_pattern_type int8 1+ =3
    principal string 0+
    host string 0+
    operation int8 0+
    permission_type int8 0+

response CreateAcls 30 1-3 flex=2+
  throttle_time_ms int32 0+
  results [] 0+
    error_code int16 0+
    error_message string 0+ null=0+

request DeleteAcls 31 1-3 flex=2+
  filters [] 0+
    resource_type_filter int8 0+
    resource_name_filter string 0+ null=0+
    pattern_type_filter int8 1+ =3
    principal_filter string 0+ null=0+
    host_filter string 0+ null=0+
    operation int8 0+
    permission_type int8 0+

response DeleteAcls 31 1-3 flex=2+
  throttle_time_ms int32 0+
  filter_results [] 0+
    error_code int16 0+
    error_message string 0+ null=0+
    matching_acls [] 0+
      error_code int16 0+
      error_message string 0+ null=0+
      resource_type int8 0+
      resource_name string 0+
      pattern_type int8 1+ =3
      principal string 0+
      host string 0+
      operation int8 0+
      permission_type int8 0+
"""
