"""Share groups' data path on the partition leader (KIP-932, Kafka's ``kafka.server.share``):
:mod:`.share_partition` (SharePartition: in-flight records, acquisition locks, delivery counts),
:mod:`.share_partition_manager` (SharePartitionManager: share partitions of this broker, ShareFetch reads),
:mod:`.share_session_cache` (share sessions) and :mod:`.delayed_share_fetch` (the ShareFetch long poll)."""
