"""Partition: one topic-partition hosted by this broker — its log and its leader/ISR state.

Mirrors ``kafka.cluster.Partition``: ``make_leader``/``make_follower`` apply a PartitionRegistration
from the metadata log; ``append_records_to_leader`` validates (LogValidator) and appends under the
log's lock, then advances the high watermark: HW = the smallest LEO of the ISR, which for an ISR made
only of this broker is its own LEO; it is never advanced while the ISR is below
``min.insync.replicas``. Reads go through the log, bounded by the HW for consumers.

Threading: ``_state_lock`` guards leader epoch, ISR and replica set (changed by the metadata publisher,
read by handler threads); appends and reads are serialised by the UnifiedLog's own lock.
"""

from __future__ import annotations

import threading

from pykbroker.log.fetch_data_info import FetchIsolation
from pykbroker.log.log_validator import LogValidator
from pykbroker.protocol import errors
from pykbroker.record.default_record_batch import CREATE_TIME, LOG_APPEND_TIME


class Partition:
    def __init__(self, topic: str, partition: int, topic_id, log, local_broker_id: int, time):
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.time = time
        self._state_lock = threading.Lock()
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.name = f"{topic}-{partition}"

    # -- state from metadata -------------------------------------------------------------------
    def make_leader(self, registration) -> bool:
        """Become (or stay) leader per ``registration``; returns True if this is a new leadership."""
        with self._state_lock:
            new = self.leader_id != self.local_broker_id or self.leader_epoch != registration.leader_epoch
            self.leader_id = self.local_broker_id
            self.leader_epoch = registration.leader_epoch
            self.partition_epoch = registration.partition_epoch
            self.replicas = tuple(registration.replicas)
            self.isr = tuple(registration.isr)
        if new:  # Kafka's maybeAssignEpochStartOffset: the new epoch starts at the current LEO
            self.log.leader_epoch_cache.assign(registration.leader_epoch, self.log.log_end_offset)
        self.maybe_increment_leader_hw()
        return new

    def make_follower(self, registration) -> bool:
        with self._state_lock:
            new = self.leader_id != registration.leader or self.leader_epoch != registration.leader_epoch
            self.leader_id = registration.leader
            self.leader_epoch = registration.leader_epoch
            self.partition_epoch = registration.partition_epoch
            self.replicas = tuple(registration.replicas)
            self.isr = tuple(registration.isr)
        return new

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    # Kafka's Partition gauges, summed by the ReplicaManager's UnderReplicatedPartitions etc.
    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.log.config.min_insync_replicas

    @property
    def is_at_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) == self.log.config.min_insync_replicas

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's leader-epoch fencing for client requests: -1 means "not provided"."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise errors.FencedLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} is older than {self.leader_epoch} for "
                f"{self.name}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise errors.UnknownLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} is newer than {self.leader_epoch} for "
                f"{self.name}"
            )

    def leader_log_or_raise(self, current_leader_epoch: int = -1):
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(
                f"Leader not local for partition {self.name} on broker {self.local_broker_id}"
            )
        self.check_leader_epoch(current_leader_epoch)
        return self.log

    # -- appends -------------------------------------------------------------------------------
    def append_records_to_leader(self, records: memoryview, required_acks: int, origin=None):
        """Validate and append; returns ``(LogAppendInfo, hw_incremented)``.
        Raises NotLeaderOrFollowerError, NotEnoughReplicasError (acks=-1 below min ISR), or the
        validator's errors (CorruptRecordError, InvalidRecordError, RecordTooLargeError, ...)."""
        with self._state_lock:
            if not self.is_leader:
                raise errors.NotLeaderOrFollowerError(
                    f"Leader not local for partition {self.name} on broker {self.local_broker_id}"
                )
            epoch = self.leader_epoch
            isr_size = len(self.isr)
        config = self.log.config
        if required_acks == -1 and isr_size < config.min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"The size of the current ISR {isr_size} is insufficient to satisfy the min.isr requirement "
                f"of {config.min_insync_replicas} for partition {self.name}"
            )

        def validate(buf: memoryview, next_offset: int):
            validator = LogValidator(
                buf,
                self.name,
                self.time,
                target_compression=config.compression_type,
                compacted_topic=config.compact,
                partition_leader_epoch=epoch,
                timestamp_type=LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime" else CREATE_TIME,
                timestamp_before_max_ms=config.message_timestamp_before_max_ms,
                timestamp_after_max_ms=config.message_timestamp_after_max_ms,
                max_message_bytes=config.max_message_bytes,
                **({"origin": origin} if origin is not None else {}),
            )
            return validator.validate_messages_and_assign_offsets(next_offset)

        kwargs = {"origin": origin} if origin is not None else {}
        info = self.log.append_as_leader(records, epoch, validate, **kwargs)
        return info, self.maybe_increment_leader_hw()

    def maybe_increment_leader_hw(self) -> bool:
        """HW = min LEO over the ISR; only this broker's LEO is known (single-node ISR)."""
        with self._state_lock:
            if not self.is_leader or len(self.isr) < 1 or self.isr != (self.local_broker_id,):
                return False
        if len(self.isr) < self.log.config.min_insync_replicas:
            return False
        return self.log.maybe_increment_high_watermark(self.log.log_end_offset_metadata) is not None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """DelayedProduce's check: ``(done, error code)``."""
        if not self.is_leader:
            return True, errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) < self.log.config.min_insync_replicas:
                return True, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, errors.NONE
        return False, errors.NONE

    # -- record deletion -----------------------------------------------------------------------
    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords on the leader (``Partition.deleteRecordsOnLeader``): move the log start offset to
        ``offset`` (-1 means the high watermark). Returns the partition's low watermark, which with a
        single replica is the new log start offset, so no DelayedDeleteRecords wait is needed.

        Raises NotLeaderOrFollowerError; PolicyViolationError when ``cleanup.policy`` has no ``delete``;
        OffsetOutOfRangeError for a negative offset or one above the high watermark."""
        log = self.leader_log_or_raise()
        if not log.config.delete:
            raise errors.PolicyViolationError(
                f"Records of partition {self.name} can not be deleted due to the configured policy"
            )
        target = log.high_watermark if offset == -1 else offset
        if target < 0:
            raise errors.OffsetOutOfRangeError(f"The offset {target} for partition {self.name} is not valid")
        log.maybe_increment_log_start_offset(target, "client delete records")
        return log.log_start_offset

    # -- reads ---------------------------------------------------------------------------------
    def read_records(
        self,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
    ):
        log = self.leader_log_or_raise(current_leader_epoch)
        return log.read(fetch_offset, max_bytes, isolation, min_one_message)
