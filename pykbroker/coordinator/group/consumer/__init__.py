"""KIP-848 ``consumer`` groups: the broker-side consumer rebalance protocol beside the classic one.

Modules: :mod:`.member` (ConsumerGroupMember), :mod:`.group` (ConsumerGroup), :mod:`.assignors` (the server
side assignors ``uniform`` and ``range``), :mod:`.target_assignment_builder`, :mod:`.current_assignment_builder`
(per-member reconciliation) and :mod:`.heartbeat` (ConsumerGroupHeartbeat / ConsumerGroupDescribe, Kafka's
``GroupMetadataManager.consumerGroupHeartbeat``).

Not persisted yet (this slice): a consumer group's epochs, members, target and current assignments live only in
the coordinator's memory (Kafka writes them to ``__consumer_offsets`` as ConsumerGroupMetadata,
ConsumerGroupPartitionMetadata, ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignment* and
ConsumerGroupCurrentMemberAssignment records). After a coordinator failover the members are unknown to the new
coordinator (UNKNOWN_MEMBER_ID) and rejoin with epoch 0; committed offsets are durable as for classic groups.
"""
