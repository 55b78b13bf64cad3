"""KIP-932 ``share`` groups: membership of share groups in the group coordinator.

Modules: :mod:`.member` (ShareGroupMember), :mod:`.group` (ShareGroup), :mod:`.assignor` (the server-side ``simple``
assignor), :mod:`.record_codec` (the groups' ``__consumer_offsets`` records), :mod:`.heartbeat`
(ShareGroupHeartbeat / ShareGroupDescribe, Kafka's ``GroupMetadataManager.shareGroupHeartbeat``) and
:mod:`.offsets` (DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets through the
Persister). The records fetched and acknowledged by share consumers are the share partitions' business
(``server/share/``), their state the share coordinator's (``coordinator/share/``).
"""
