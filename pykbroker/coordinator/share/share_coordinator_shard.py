"""ShareCoordinatorShard: the share partitions' state of one ``__share_group_state`` partition.

Mirrors Kafka's ``org.apache.kafka.coordinator.share.ShareCoordinatorShard``. The shard's state is what its records
say: :meth:`replay` applies a ShareSnapshot (the whole state), a ShareUpdate (laid over the state with
:func:`~pykbroker.coordinator.share.persister.merge_batches`) or a tombstone (the state is gone), both when the
partition is loaded and after each successful append. The operations check a request against the state and return
the records to append and the answer to give once they are written; they never change the state themselves.

* write: FENCED_LEADER_EPOCH when a newer partition leader wrote or read already, FENCED_STATE_EPOCH when the group
  coordinator initialized a newer state epoch; the first write of a key, and every write after
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates, is a ShareSnapshot, the others ShareUpdates.
* read: UNKNOWN_TOPIC_OR_PARTITION before the state is initialized (or written), FENCED_LEADER_EPOCH for an older
  leader; a newer leader epoch is recorded (a ShareUpdate without batches) so older leaders are fenced from then on.
* initialize: FENCED_STATE_EPOCH for an older state epoch, else a ShareSnapshot with no batches.
* delete: tombstones. read summary: the state epoch, start offset, leader epoch and delivery complete count.

The delivery complete count (KIP-1226: offsets at or above the start offset that are acknowledged or archived) is
the writer's; an initialization sets it to 0 with a start offset, -1 without; a ShareUpdate that only records a
reader's leader epoch leaves it.

Pruning (Kafka 4.1's ShareCoordinatorOffsetsManager): replay is told each record's offset; the shard remembers the
offset of every live share partition's latest ShareSnapshot, so :meth:`last_redundant_offset` (the smallest of them,
or past the last record when no share partition is left) is the offset below which no record is needed any more.

Errors are Kafka's codes; INVALID_REQUEST for a negative partition. Threading: none; the ShareCoordinator calls a
shard under its lock, one operation at a time.
"""

from __future__ import annotations

from pykbroker.coordinator.share.persister import (
    PersisterStateBatch,
    ReadStateResult,
    ReadSummaryResult,
    merge_batches,
)
from pykbroker.coordinator.share.share_coordinator_records import (
    SNAPSHOT_KEY_VERSION,
    UPDATE_KEY_VERSION,
    ShareGroupOffset,
    ShareKey,
    decode_key,
    decode_snapshot_value,
    decode_update_value,
    key_version,
    snapshot_record,
    tombstones,
    update_record,
)
from pykbroker.protocol import errors

Records = list[tuple[bytes, bytes | None]]


class ShareCoordinatorShard:
    def __init__(self, records_per_snapshot: int = 500):
        self.records_per_snapshot = records_per_snapshot
        self.states: dict[ShareKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[ShareKey, int] = {}
        self.state_epochs: dict[ShareKey, int] = {}
        self.update_counts: dict[ShareKey, int] = {}
        self.snapshot_offsets: dict[ShareKey, int] = {}  # offset of each live key's latest ShareSnapshot
        self.last_offset = -1  # offset of the last record replayed with its offset

    # -- replay ---------------------------------------------------------------------------------------
    def replay(
        self, key_bytes: bytes | memoryview, value_bytes: bytes | memoryview | None, offset: int | None = None
    ) -> None:
        """Apply one record of the partition, at ``offset`` in its log (None: unknown, pruning then keeps every
        record); RecordDecodeError on a malformed one; unknown types are ignored."""
        if offset is not None and offset > self.last_offset:
            self.last_offset = offset
        version = key_version(key_bytes)
        if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
            return
        key = decode_key(key_bytes)
        if value_bytes is None:
            for table in (
                self.states,
                self.leader_epochs,
                self.state_epochs,
                self.update_counts,
                self.snapshot_offsets,
            ):
                table.pop(key, None)
            return
        if version == SNAPSHOT_KEY_VERSION:
            snap = decode_snapshot_value(value_bytes)
            self._raise_epochs(key, snap.leader_epoch, snap.state_epoch)
            self.states[key] = snap
            self.update_counts[key] = 0
            if offset is None:
                self.snapshot_offsets.pop(key, None)
            else:
                self.snapshot_offsets[key] = offset
            return
        upd = decode_update_value(value_bytes)
        self._raise_epochs(key, upd["leader_epoch"], None)
        cur = self.states.get(key)
        if cur is None:
            start = upd["start_offset"]
            self.states[key] = ShareGroupOffset(upd["snapshot_epoch"], 0, upd["leader_epoch"], start, ())
            cur = self.states[key]
        start = cur.start_offset if upd["start_offset"] == -1 else upd["start_offset"]
        dcc = upd.get("delivery_complete_count", -1)
        if dcc == -1 and upd["start_offset"] == -1 and not upd["state_batches"]:
            dcc = cur.delivery_complete_count  # a reader's leader epoch only
        self.states[key] = cur._replace(
            delivery_complete_count=dcc,
            start_offset=start,
            leader_epoch=cur.leader_epoch if upd["leader_epoch"] == -1 else upd["leader_epoch"],
            state_batches=merge_batches(cur.state_batches, upd["state_batches"], max(start, 0)),
        )
        self.update_counts[key] = self.update_counts.get(key, 0) + 1

    def last_redundant_offset(self) -> int | None:
        """The offset below which the partition's records are not needed to rebuild this state: the smallest offset of
        a live share partition's latest snapshot, or the offset after the last record when none is live. None when a
        live share partition's snapshot offset is unknown (nothing may be pruned)."""
        if any(key not in self.snapshot_offsets for key in self.states):
            return None
        if self.snapshot_offsets:
            return min(self.snapshot_offsets.values())
        return self.last_offset + 1 if self.last_offset >= 0 else None

    def _raise_epochs(self, key: ShareKey, leader_epoch: int, state_epoch: int | None) -> None:
        if leader_epoch > self.leader_epochs.get(key, -1):
            self.leader_epochs[key] = leader_epoch
        if state_epoch is not None and state_epoch > self.state_epochs.get(key, -1):
            self.state_epochs[key] = state_epoch

    # -- operations -----------------------------------------------------------------------------------
    def write_state(
        self,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[PersisterStateBatch, ...],
        delivery_complete_count: int = -1,
    ) -> tuple[Records, int]:
        """``(records, error code)`` of a WriteShareGroupState partition."""
        if key[2] < 0:
            return [], errors.INVALID_REQUEST
        if self.leader_epochs.get(key, -1) > leader_epoch:
            return [], errors.FENCED_LEADER_EPOCH
        if self.state_epochs.get(key, -1) > state_epoch:
            return [], errors.FENCED_STATE_EPOCH
        cur = self.states.get(key)
        if cur is None:
            snap = ShareGroupOffset(
                0,
                state_epoch,
                leader_epoch,
                start_offset,
                merge_batches((), batches, max(start_offset, 0)),
                delivery_complete_count,
            )
            return [snapshot_record(key, snap)], errors.NONE
        if self.update_counts.get(key, 0) >= self.records_per_snapshot:
            start = cur.start_offset if start_offset == -1 else start_offset
            snap = ShareGroupOffset(
                (cur.snapshot_epoch + 1) & 0xFFFF,
                cur.state_epoch if state_epoch == -1 else state_epoch,
                cur.leader_epoch if leader_epoch == -1 else leader_epoch,
                start,
                merge_batches(cur.state_batches, batches, max(start, 0)),
                delivery_complete_count,
            )
            return [snapshot_record(key, snap)], errors.NONE
        upd = update_record(
            key, cur.snapshot_epoch, leader_epoch, start_offset, merge_batches((), batches, 0), delivery_complete_count
        )
        return [upd], errors.NONE

    def read_state(self, key: ShareKey, leader_epoch: int) -> tuple[Records, ReadStateResult]:
        """``(records, result)`` of a ReadShareGroupState partition; the records record a newer leader epoch."""
        if key[2] < 0:
            return [], ReadStateResult(errors.INVALID_REQUEST, -1, -1)
        cur = self.states.get(key)
        if cur is None:
            return [], ReadStateResult(errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
        if self.leader_epochs.get(key, -1) > leader_epoch:
            return [], ReadStateResult(errors.FENCED_LEADER_EPOCH, -1, -1)
        result = ReadStateResult(errors.NONE, cur.state_epoch, cur.start_offset, cur.state_batches)
        records: Records = []
        if leader_epoch > self.leader_epochs.get(key, -1):
            records.append(update_record(key, cur.snapshot_epoch, leader_epoch, -1, ()))
        return records, result

    def read_summary(self, key: ShareKey) -> ReadSummaryResult:
        """The answer of a ReadShareGroupStateSummary partition."""
        if key[2] < 0:
            return ReadSummaryResult(errors.INVALID_REQUEST, -1, -1)
        cur = self.states.get(key)
        if cur is None:
            return ReadSummaryResult(errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
        return ReadSummaryResult(
            errors.NONE, cur.state_epoch, cur.start_offset, None, cur.leader_epoch, cur.delivery_complete_count
        )

    def initialize_state(self, key: ShareKey, state_epoch: int, start_offset: int) -> tuple[Records, int]:
        """``(records, error code)`` of an InitializeShareGroupState partition."""
        if key[2] < 0:
            return [], errors.INVALID_REQUEST
        if self.state_epochs.get(key, -1) > state_epoch:
            return [], errors.FENCED_STATE_EPOCH
        cur = self.states.get(key)
        snapshot_epoch = 0 if cur is None else (cur.snapshot_epoch + 1) & 0xFFFF
        dcc = -1 if start_offset < 0 else 0  # Kafka's ShareGroupOffset.fromRequest(Initialize...)
        snap = ShareGroupOffset(snapshot_epoch, state_epoch, self.leader_epochs.get(key, -1), start_offset, (), dcc)
        return [snapshot_record(key, snap)], errors.NONE

    def delete_state(self, key: ShareKey) -> tuple[Records, int]:
        """``(records, error code)`` of a DeleteShareGroupState partition (nothing to write when there is no state)."""
        if key[2] < 0:
            return [], errors.INVALID_REQUEST
        if key not in self.states:
            return [], errors.NONE
        return list(tombstones(key)), errors.NONE
