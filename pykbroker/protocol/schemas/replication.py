"""Replication APIs: AlterPartition (key 56, leader -> controller ISR changes), ElectLeaders (key 43),
AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46, KIP-455).

Schema DSL: see :mod:`pykbroker.protocol.schema`. Field names, types and versions are protocol facts.
"""

SCHEMAS = """
request AlterPartition 56 0-3 flex=0+
  broker_id int32 0+
  broker_epoch int64 0+ =-1
  topics [] 0+
    topic_name string 0-1
    topic_id uuid 2+
    partitions [] 0+
      partition_index int32 0+
      leader_epoch int32 0+
      new_isr []int32 0-2
      new_isr_with_epochs [] 3+
        broker_id int32 3+
        broker_epoch int64 3+ =-1
      leader_recovery_state int8 1+ =0
      partition_epoch int32 0+

response AlterPartition 56 0-3 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  topics [] 0+
    topic_name string 0-1
    topic_id uuid 2+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      leader_id int32 0+
      leader_epoch int32 0+
      isr []int32 0+
      leader_recovery_state int8 1+ =0
      partition_epoch int32 0+

request ElectLeaders 43 0-2 flex=2+
  election_type int8 1+ =0
  topic_partitions [] 0+ null=0+
    topic string 0+
    partitions []int32 0+
  timeout_ms int32 0+ =60000

response ElectLeaders 43 0-2 flex=2+
  throttle_time_ms int32 0+
  error_code int16 1+ =0
  replica_election_results [] 0+
    topic string 0+
    partition_result [] 0+
      partition_id int32 0+
      error_code int16 0+
      error_message string 0+ null=0+

request AlterPartitionReassignments 45 0 flex=0+
  timeout_ms int32 0+ =60000
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      replicas []int32 0+ null=0+ =null

response AlterPartitionReassignments 45 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+
  responses [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      error_code int16 0+
      error_message string 0+ null=0+

request ListPartitionReassignments 46 0 flex=0+
  timeout_ms int32 0+ =60000
  topics [] 0+ null=0+ =null
    name string 0+
    partition_indexes []int32 0+

response ListPartitionReassignments 46 0 flex=0+
  throttle_time_ms int32 0+
  error_code int16 0+
  error_message string 0+ null=0+
  topics [] 0+
    name string 0+
    partitions [] 0+
      partition_index int32 0+
      replicas []int32 0+
      adding_replicas []int32 0+
      removing_replicas []int32 0+
"""
