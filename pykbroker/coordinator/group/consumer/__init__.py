"""KIP-848 ``consumer`` groups: the broker-side consumer rebalance protocol beside the classic one.

Modules: :mod:`.member` (ConsumerGroupMember), :mod:`.group` (ConsumerGroup), :mod:`.assignors` (the server
side assignors ``uniform`` and ``range``), :mod:`.target_assignment_builder`, :mod:`.current_assignment_builder`
(per-member reconciliation), :mod:`.heartbeat` (ConsumerGroupHeartbeat / ConsumerGroupDescribe, Kafka's
``GroupMetadataManager.consumerGroupHeartbeat``), :mod:`.migration` with :mod:`.consumer_protocol` (online
migration between classic and consumer groups) and :mod:`.record_codec` (the groups' ``__consumer_offsets`` records).
"""
