"""TransactionCoordinator: the transaction APIs of KIP-98 for the transactional ids this broker owns.

Mirrors ``kafka.coordinator.transaction.TransactionCoordinator``, transaction versions 0/1 and 2 side by side,
chosen per transaction by the requests' versions as Kafka does:

* version 0/1 (AddPartitionsToTxn up to v4, EndTxn up to v4): the producer epoch is bumped by InitProducerId
  (KIP-360 retries included) and by fencing, not at every commit;
* version 2 (KIP-890 part 2: partitions added by the partition leaders' AddPartitionsToTxn v5 on a Produce v12,
  EndTxn v5): every EndTxn bumps the epoch in PrepareCommit/PrepareAbort, the markers carry the bumped epoch
  (so a late write of the finished transaction is fenced by the partition) and EndTxn returns it; when the
  bumped epoch is the last one (``Short.MaxValue``), a new producer id is allocated first and returned at
  epoch 0, and it replaces the old one once the markers are written. An EndTxn retried with the previous
  epoch is recognised (Kafka's ``endTxnEpochBumped``). Aborts the coordinator starts itself (fencing,
  timeouts) use the finalized ``transaction.version``.

The rest, for every version:

* InitProducerId(transactional id): a new id gets a producer id (from the ProducerIdManager) and epoch 0;
  a known idle one the epoch + 1 (a new producer id when the epoch is exhausted); an id with an Ongoing
  transaction is fenced: the epoch is bumped, the open transaction aborted with it, and the caller gets
  CONCURRENT_TRANSACTIONS until the abort completed (then its retry gets the new epoch; the old
  producer gets PRODUCER_FENCED / INVALID_PRODUCER_EPOCH from then on);
* AddPartitionsToTxn (and AddOffsetsToTxn, which adds the group's ``__consumer_offsets`` partition):
  Empty/Complete* -> Ongoing, the partitions added;
* verification of partitions (AddPartitionsToTxn v4+ ``verify_only``): which partitions are in the
  transaction (TRANSACTION_ABORTABLE for the others);
* EndTxn: Ongoing -> PrepareCommit/PrepareAbort appended, the client answered, then the markers
  written by the TransactionMarkerChannelManager and CompleteCommit/CompleteAbort appended;
* a scheduled task (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) fences and aborts
  transactions open longer than their timeout; another one expires idle transactional ids;
* DescribeTransactions / ListTransactions.

Errors are Kafka's: INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
INVALID_TXN_STATE, TRANSACTIONAL_ID_NOT_FOUND.

Threading: called from request handler threads; callbacks may run on other threads (append completion,
the marker sender thread). State is guarded by each TransactionMetadata's lock and the state manager's.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.transaction_configs import (
    TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG,
    TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG,
)
from pykbroker.coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from pykbroker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from pykbroker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from pykbroker.protocol import errors
from pykbroker.utils.logging import get_logger

_S = TransactionState
_log = get_logger("TransactionCoordinator")


class TransactionCoordinator:
    def __init__(
        self,
        node_id: int,
        config,
        state_manager: TransactionStateManager,
        marker_channel: TransactionMarkerChannelManager,
        producer_id_manager,
        scheduler,
        time,
    ):
        self.node_id = node_id
        self.config = config
        self.txn_manager = state_manager
        self.marker_channel = marker_channel
        self.producer_id_manager = producer_id_manager
        self.scheduler = scheduler
        self.time = time
        self._active = False

    def startup(self) -> None:
        interval = self.config[TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG]
        self.scheduler.schedule("transaction-abort", self.abort_timed_out_transactions, interval, interval)
        expiry = self.config[TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS_CONFIG]
        self.scheduler.schedule(
            "transactionalId-expiration", self.txn_manager.remove_expired_transactional_ids, expiry, expiry
        )
        self.marker_channel.start()
        self._active = True

    def shutdown(self) -> None:
        self._active = False
        self.marker_channel.shutdown()

    def partition_for(self, transactional_id: str) -> int:
        return self.txn_manager.partition_for(transactional_id)

    # -- leadership ---------------------------------------------------------------------------
    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        _log.info("Elected as the txn coordinator", partition=partition, coordinator_epoch=coordinator_epoch)
        self.marker_channel.remove_markers_for_txn_topic_partition(partition)
        self.txn_manager.on_election(partition, coordinator_epoch, self.marker_channel.add_txn_markers_to_send)

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        _log.info("Resigned as the txn coordinator", partition=partition, coordinator_epoch=coordinator_epoch)
        self.txn_manager.on_resignation(partition, coordinator_epoch)
        self.marker_channel.remove_markers_for_txn_topic_partition(partition)

    # -- InitProducerId -----------------------------------------------------------------------
    def handle_init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None, callback
    ) -> None:
        """``callback(error_code, producer_id, producer_epoch)``. ``expected``: the (producer id, epoch) a
        v3+ client sends to recover (KIP-360), None if it sent -1/-1."""

        def fail(code: int) -> None:
            callback(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        if not transactional_id:
            return fail(errors.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(timeout_ms):
            return fail(errors.INVALID_TRANSACTION_TIMEOUT)
        try:
            existing = self.txn_manager.get_transaction_state(transactional_id)
        except errors.KafkaError as e:
            return fail(e.code)
        if existing is not None:
            return self._init_with(existing, transactional_id, timeout_ms, expected, callback)

        def allocated(code: int, producer_id: int) -> None:
            if code != errors.NONE:
                return fail(code)
            created = TransactionMetadata(
                transactional_id,
                producer_id,
                txn_timeout_ms=timeout_ms,
                txn_last_update_timestamp=self.time.milliseconds(),
            )
            try:
                entry = self.txn_manager.put_transaction_state_if_not_exists(created)
            except errors.KafkaError as e:
                return fail(e.code)
            self._init_with(entry, transactional_id, timeout_ms, expected, callback)

        self.producer_id_manager.generate_producer_id(allocated)
        return None

    def _init_with(self, entry, transactional_id: str, timeout_ms: int, expected, callback) -> None:
        coordinator_epoch, m = entry
        rotate = False
        with m.lock:
            result = self._prepare_init_producer_id_transit(m, timeout_ms, expected)
            if result == "rotate":
                rotate = True
        if rotate:
            return self._rotate_producer_id(entry, transactional_id, timeout_ms, expected, callback)
        if isinstance(result, int):
            return callback(result, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        transit = result
        if transit.txn_state is _S.PREPARE_EPOCH_FENCE:

            def fenced(code: int, _pid: int, _epoch: int) -> None:
                callback(code if code != errors.NONE else errors.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, -1)

            return self._end_transaction(
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                False,
                False,
                fenced,
                self.txn_manager.transaction_version(),
            )

        def appended(code: int) -> None:
            if code == errors.NONE:
                _log.info(
                    f"Initialized transactionalId {transactional_id} with producerId {transit.producer_id} and "
                    f"producer epoch {transit.producer_epoch} on partition "
                    f"__transaction_state-{self.partition_for(transactional_id)}"
                )
                callback(errors.NONE, transit.producer_id, transit.producer_epoch)
            else:
                callback(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit, appended)
        return None

    def _rotate_producer_id(self, entry, transactional_id, timeout_ms, expected, callback) -> None:
        coordinator_epoch, m = entry

        def allocated(code: int, producer_id: int) -> None:
            if code != errors.NONE:
                return callback(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            with m.lock:
                if m.pending_transition_in_progress:
                    return callback(errors.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                transit = m.prepare_producer_id_rotation(
                    producer_id, timeout_ms, self.time.milliseconds(), expected is not None
                )

            def appended(code: int) -> None:
                if code == errors.NONE:
                    callback(errors.NONE, transit.producer_id, transit.producer_epoch)
                else:
                    callback(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

            self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit, appended)
            return None

        self.producer_id_manager.generate_producer_id(allocated)

    def _prepare_init_producer_id_transit(self, m: TransactionMetadata, timeout_ms: int, expected):
        """A transit, an error code, or ``"rotate"`` (a new producer id is needed first)."""
        if m.pending_transition_in_progress:
            return errors.CONCURRENT_TRANSACTIONS
        if expected is not None:
            pid, epoch = expected
            valid = (
                m.producer_epoch == NO_PRODUCER_EPOCH
                or pid == m.producer_id
                or (pid == m.previous_producer_id and is_epoch_exhausted(epoch))
            )
            if not valid:
                return errors.PRODUCER_FENCED
        state = m.state
        if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return errors.CONCURRENT_TRANSACTIONS
        if state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if m.is_producer_epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
                return "rotate"
            return m.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self.time.milliseconds()
            )
        if state is _S.ONGOING:
            return m.prepare_fence_producer_epoch()
        return errors.CONCURRENT_TRANSACTIONS  # Dead / PrepareEpochFence: being removed or fenced

    # -- AddPartitionsToTxn -------------------------------------------------------------------
    def handle_add_partitions_to_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: set,
        callback,
        client_transaction_version: int = 0,
    ) -> None:
        """``callback(error_code)`` for all of ``partitions``. ``client_transaction_version``: 2 for a partition
        leader's implicit add (AddPartitionsToTxn v5 on a Produce v12), else 0."""
        if not transactional_id:
            return callback(errors.INVALID_REQUEST)
        try:
            entry = self.txn_manager.get_transaction_state(transactional_id)
        except errors.KafkaError as e:
            return callback(e.code)
        if entry is None:
            return callback(errors.INVALID_PRODUCER_ID_MAPPING)
        coordinator_epoch, m = entry
        with m.lock:
            if m.producer_id != producer_id:
                return callback(errors.INVALID_PRODUCER_ID_MAPPING)
            if m.producer_epoch != producer_epoch:
                return callback(errors.PRODUCER_FENCED)
            if m.pending_transition_in_progress or m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return callback(errors.CONCURRENT_TRANSACTIONS)
            if m.state is _S.ONGOING and set(partitions) <= m.topic_partitions:
                return callback(errors.NONE)
            transit = m.prepare_add_partitions(set(partitions), self.time.milliseconds(), client_transaction_version)
        self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit, callback)
        return None

    def handle_verify_partitions_in_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set
    ) -> dict:
        """``{partition: error_code}`` (KIP-890 verification: is each partition in the transaction?)."""
        if not transactional_id:
            return dict.fromkeys(partitions, errors.INVALID_REQUEST)
        try:
            entry = self.txn_manager.get_transaction_state(transactional_id)
        except errors.KafkaError as e:
            return dict.fromkeys(partitions, e.code)
        if entry is None:
            return dict.fromkeys(partitions, errors.INVALID_PRODUCER_ID_MAPPING)
        m = entry.metadata
        with m.lock:
            if m.producer_id != producer_id:
                return dict.fromkeys(partitions, errors.INVALID_PRODUCER_ID_MAPPING)
            if m.producer_epoch != producer_epoch:
                return dict.fromkeys(partitions, errors.PRODUCER_FENCED)
            if m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return dict.fromkeys(partitions, errors.CONCURRENT_TRANSACTIONS)
            return {tp: errors.NONE if tp in m.topic_partitions else errors.TRANSACTION_ABORTABLE for tp in partitions}

    # -- EndTxn -------------------------------------------------------------------------------
    def handle_end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        callback,
        client_transaction_version: int = 0,
    ) -> None:
        """``callback(error_code, producer_id, producer_epoch)``: on success the producer id and epoch of the
        next transaction (at version 2 the bumped epoch, or a new producer id at epoch 0).
        ``client_transaction_version``: 2 for EndTxn v5, else 0."""
        self._end_transaction(
            transactional_id, producer_id, producer_epoch, commit, True, callback, client_transaction_version
        )

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        callback,
        client_transaction_version: int,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> None:
        if not transactional_id:
            return callback(errors.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        try:
            entry = self.txn_manager.get_transaction_state(transactional_id)
        except errors.KafkaError as e:
            return callback(e.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if entry is None:
            return callback(errors.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        coordinator_epoch, m = entry
        tv = client_transaction_version
        with m.lock:
            result = self._prepare_end(m, producer_id, producer_epoch, commit, from_client, tv, next_producer_id)
            current = (m.producer_id, m.producer_epoch)
        if result is None:  # the bumped epoch is the last one: a new producer id first (Kafka's nextProducerId)

            def allocated(code: int, new_producer_id: int) -> None:
                if code != errors.NONE:
                    return callback(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                self._end_transaction(
                    transactional_id, producer_id, producer_epoch, commit, from_client, callback, tv, new_producer_id
                )
                return None

            self.producer_id_manager.generate_producer_id(allocated)
            return None
        if isinstance(result, int):
            if result == errors.NONE:
                return callback(errors.NONE, *current)
            return callback(result, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        transit = result

        def appended(code: int) -> None:
            if code != errors.NONE:
                if not from_client:
                    with m.lock:
                        m.has_failed_epoch_fence = True
                return callback(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            if self.txn_manager.coordinator_epoch_of(self.partition_for(transactional_id)) != coordinator_epoch:
                return callback(errors.NOT_COORDINATOR, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            with m.lock:
                if m.producer_id != producer_id:
                    return callback(errors.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                if m.producer_epoch != transit.producer_epoch:
                    return callback(errors.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                if m.state is not transit.txn_state or m.pending_transition_in_progress:
                    return callback(errors.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                pre_send = m.prepare_no_transit()
                if supports_epoch_bump(m.client_transaction_version) and m.next_producer_id != NO_PRODUCER_ID:
                    answer = (m.next_producer_id, 0)
                else:
                    answer = (m.producer_id, m.producer_epoch)
            callback(errors.NONE, *answer)
            self.marker_channel.add_txn_markers_to_send(coordinator_epoch, commit, m, pre_send)
            return None

        self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit, appended)
        return None

    def _prepare_end(
        self,
        m: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        tv: int,
        next_producer_id: int,
    ):
        """The Prepare* transit, an error code (NONE: already done), or None: a new producer id is needed."""
        fencing = m.pending_state is _S.PREPARE_EPOCH_FENCE
        v2 = not fencing and supports_epoch_bump(m.client_transaction_version)
        # a version-2 EndTxn retried after its epoch bump exhausted the epoch (the new producer id is in place)
        retry_on_overflow = (
            v2 and m.previous_producer_id == producer_id and producer_epoch == SHORT_MAX - 1 and m.producer_epoch == 0
        )
        retry_on_bump = v2 and m.producer_epoch == producer_epoch + 1
        if m.producer_id != producer_id and not retry_on_overflow:
            return errors.INVALID_PRODUCER_ID_MAPPING
        if v2:
            # At version 2 the same epoch means the next EndTxn, the previous one a retry of the last.
            if m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                valid_epoch = retry_on_bump
            elif m.state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
                valid_epoch = retry_on_bump or retry_on_overflow
            else:
                valid_epoch = producer_epoch == m.producer_epoch
        else:
            valid_epoch = (not from_client or producer_epoch == m.producer_epoch) and producer_epoch >= m.producer_epoch
        if not valid_epoch:
            return errors.PRODUCER_FENCED
        if m.pending_transition_in_progress and m.pending_state is not _S.PREPARE_EPOCH_FENCE:
            return errors.CONCURRENT_TRANSACTIONS
        state = m.state
        if state is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            if (
                supports_epoch_bump(tv)
                and not fencing
                and m.is_producer_epoch_exhausted
                and next_producer_id == NO_PRODUCER_ID
            ):
                return None
            if not commit and m.pending_state is _S.PREPARE_EPOCH_FENCE:
                # The fence's bumped epoch becomes the transaction's: the abort markers carry it, so the
                # zombie's late writes are rejected (Kafka's isEpochFence).
                m.pending_state = None
                m.producer_epoch = producer_epoch
                m.last_producer_epoch = NO_PRODUCER_EPOCH
            return m.prepare_abort_or_commit(next_state, self.time.milliseconds(), tv, next_producer_id)
        if state is _S.COMPLETE_COMMIT:
            return errors.NONE if commit else errors.INVALID_TXN_STATE
        if state is _S.COMPLETE_ABORT:
            return errors.INVALID_TXN_STATE if commit else errors.NONE
        if state is _S.PREPARE_COMMIT:
            return errors.CONCURRENT_TRANSACTIONS if commit else errors.INVALID_TXN_STATE
        if state is _S.PREPARE_ABORT:
            return errors.INVALID_TXN_STATE if commit else errors.CONCURRENT_TRANSACTIONS
        if state is _S.EMPTY:
            return errors.INVALID_TXN_STATE
        return errors.CONCURRENT_TRANSACTIONS

    # -- timeouts -----------------------------------------------------------------------------
    def abort_timed_out_transactions(self) -> int:
        """Fence and abort every transaction open longer than its timeout. Returns how many."""
        aborted = 0
        for tid, producer_id, _epoch in self.txn_manager.timed_out_transactions():
            try:
                entry = self.txn_manager.get_transaction_state(tid)
            except errors.KafkaError:
                continue
            if entry is None:
                continue
            m = entry.metadata
            with m.lock:
                if m.producer_id != producer_id or m.pending_transition_in_progress or m.state is not _S.ONGOING:
                    continue
                transit = m.prepare_fence_producer_epoch()
            aborted += 1
            _log.info(
                f"Aborting transaction of transactionalId {tid} that exceeded its timeout of {m.txn_timeout_ms} ms"
            )

            def done(code: int, _pid: int, _epoch: int, tid=tid) -> None:
                if code == errors.NONE:
                    _log.info(f"Completed rollback of ongoing transaction for transactionalId {tid} due to timeout")
                elif code not in (
                    errors.INVALID_PRODUCER_ID_MAPPING,
                    errors.PRODUCER_FENCED,
                    errors.CONCURRENT_TRANSACTIONS,
                ):
                    _log.warning(f"Rollback of ongoing transaction for transactionalId {tid} failed: {code}")

            self._end_transaction(
                tid,
                transit.producer_id,
                transit.producer_epoch,
                False,
                False,
                done,
                self.txn_manager.transaction_version(),
            )
        return aborted

    # -- describe / list ----------------------------------------------------------------------
    def handle_describe_transactions(self, transactional_id: str) -> dict:
        state = {
            "error_code": errors.NONE,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        if not self._active:
            return dict(state, error_code=errors.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return dict(state, error_code=errors.INVALID_REQUEST)
        try:
            entry = self.txn_manager.get_transaction_state(transactional_id)
        except errors.KafkaError as e:
            return dict(state, error_code=e.code)
        if entry is None:
            return dict(state, error_code=errors.TRANSACTIONAL_ID_NOT_FOUND)
        m = entry.metadata
        with m.lock:
            if m.state is _S.DEAD:
                return dict(state, error_code=errors.TRANSACTIONAL_ID_NOT_FOUND)
            topics: dict[str, list[int]] = {}
            for t, p in sorted(m.topic_partitions):
                topics.setdefault(t, []).append(p)
            return dict(
                state,
                transaction_state=m.state.state_name,
                transaction_timeout_ms=m.txn_timeout_ms,
                transaction_start_time_ms=m.txn_start_timestamp,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
            )

    def handle_list_transactions(self, producer_ids: set[int], states: set[str], duration_ms: int = -1) -> dict:
        if not self._active:
            return {
                "error_code": errors.COORDINATOR_NOT_AVAILABLE,
                "unknown_state_filters": [],
                "transaction_states": [],
            }
        if self.txn_manager.is_loading:
            return {
                "error_code": errors.COORDINATOR_LOAD_IN_PROGRESS,
                "unknown_state_filters": [],
                "transaction_states": [],
            }
        unknown = sorted(s for s in states if TransactionState.from_name(s) is None)
        wanted = {TransactionState.from_name(s) for s in states} - {None}
        now = self.time.milliseconds()
        out = []
        for m in self.txn_manager.all_transactions():
            with m.lock:
                if producer_ids and m.producer_id not in producer_ids:
                    continue
                if states and m.state not in wanted:
                    continue
                if duration_ms >= 0 and now - m.txn_start_timestamp <= duration_ms:
                    continue
                if m.state is _S.DEAD:
                    continue
                out.append(
                    {
                        "transactional_id": m.transactional_id,
                        "producer_id": m.producer_id,
                        "transaction_state": m.state.state_name,
                    }
                )
        return {"error_code": errors.NONE, "unknown_state_filters": unknown, "transaction_states": out}
