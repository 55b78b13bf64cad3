"""Config and log-dir admin APIs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs,
DescribeClientQuotas and AlterClientQuotas (KIP-546).

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request DescribeConfigs 32 0-4 flex=4+
  resources [] 0+
    resource_type int8 0+
    resource_name string 0+
    configuration_keys []string 0+ null=0+
  include_synonyms bool 1+ =false
  include_documentation bool 3+ =false

response DescribeConfigs 32 0-4 flex=4+
  throttle_time_ms int32 0+
  results [] 0+
    error_code int16 0+
    error_message string 0+ null=0+
    resource_type int8 0+
    resource_name string 0+
    configs [] 0+
      name string 0+
      value string 0+ null=0+
      read_only bool 0+
      is_default bool 0
      config_source int8 1+ =-1
      is_sensitive bool 0+
      synonyms [] 1+
        name string 1+
        value string 1+ null=0+
        source int8 1+
      config_type int8 3+ =0
      documentation string 3+ null=0+

request AlterConfigs 33 0-2 flex=2+
  resources [] 0+
    resource_type int8 0+
    resource_name string 0+
    configs [] 0+
      name string 0+
      value string 0+ null=0+
  validate_only bool 0+

response AlterConfigs 33 0-2 flex=2+
  throttle_time_ms int32 0+
  responses [] 0+
    error_code int16 0+
    error_message string 0+ null=0+
    resource_type int8 0+
    resource_name string 0+

request IncrementalAlterConfigs 44 0-1 flex=1+
  resources [] 0+
    resource_type int8 0+
    resource_name string 0+
    configs [] 0+
      name string 0+
      config_operation int8 0+
      value string 0+ null=0+
  validate_only bool 0+

response IncrementalAlterConfigs 44 0-1 flex=1+
  throttle_time_ms int32 0+
  responses [] 0+
    error_code int16 0+
    error_message string 0+ null=0+
    resource_type int8 0+
    resource_name string 0+

request DescribeLogDirs 35 0-4 flex=2+
  topics [] 0+ null=0+
    topic string 0+
    partitions []int32 0+

response DescribeLogDirs 35 0-4 flex=2+
  throttle_time_ms int32 0+
  error_code int16 3+
  results [] 0+
    error_code int16 0+
    log_dir string 0+
    topics [] 0+
      name string 0+
      partitions [] 0+
        partition_index int32 0+
        partition_size int64 0+
        offset_lag int64 0+
        is_future_key bool 0+
    total_bytes int64 4+ =-1
    usable_bytes int64 4+ =-1

request DescribeClientQuotas 48 0-1 flex=1+
  components [] 0+
    entity_type string 0+
    match_type int8 0+
    match string 0+ null=0+
  strict bool 0+

response DescribeClientQuotas 48 0-1 flex=1+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+
  entries [] 0+ null=0+
    entity [] 0+
      entity_type string 0+
      entity_name string 0+ null=0+
    values [] 0+
      key string 0+
      value float64 0+

request AlterClientQuotas 49 0-1 flex=1+
  entries [] 0+
    entity [] 0+
      entity_type string 0+
      entity_name string 0+ null=0+
    ops [] 0+
      key string 0+
      value float64 0+
      remove bool 0+
  validate_only bool 0+

response AlterClientQuotas 49 0-1 flex=1+
  throttle_time_ms int32 0+
  entries [] 0+
    error_code int16 0+
    error_message string 0+ null=0+
    entity [] 0+
      entity_type string 0+
      entity_name string 0+ null=0+
"""
