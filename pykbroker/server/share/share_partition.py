"""SharePartition: the delivery state of one (share group, topic partition) on the partition's leader (KIP-932).

Mirrors Kafka's ``kafka.server.share.SharePartition``. The share-partition start offset (SPSO, ``start_offset``)
is the first offset not yet acknowledged or archived; the end offset (SPEO, ``end_offset``) the first offset never
acquired. Between them lie the in-flight records, kept as ranges of offsets in one state (Kafka's InFlightBatch
with its per-offset states, split only where an acknowledgement or a lock expiry splits them):

- AVAILABLE: may be acquired (again) by a ShareFetch;
- ACQUIRED: handed to one member under an acquisition lock (``record_lock_duration_ms``); the lock's expiry makes
  the records AVAILABLE again, or ARCHIVED when their delivery count reached ``delivery_count_limit``;
- ACKNOWLEDGED (accepted) and ARCHIVED (rejected, beyond the delivery limit, aborted or control records): final.

Acquisition takes whole log batches (Kafka's batch-optimized acquisition): records are never looked at one by one;
a batch of an aborted transaction (read_committed) or a control batch is archived instead of acquired. At most
``max_in_flight`` offsets are in flight (``group.share.partition.max.record.locks``). As Kafka's, an acquisition
is not written to the :class:`~pykbroker.coordinator.share.persister.Persister`: acknowledgements, releases, lock
expiries and archived batches are, each write carrying the whole in-flight state (ACQUIRED as AVAILABLE, with its
delivery count). The state is read back when the partition is (re)created on a new leader, fenced by the leader
epoch; so a delivery that no write recorded (records acquired, then the leader died) is not counted after the
failover (Kafka's documented under-count), and records beyond the last written end offset are delivered as new.

Acknowledge types (ShareFetch/ShareAcknowledge ``acknowledge_types``): 0 GAP (archived), 1 ACCEPT, 2 RELEASE,
3 REJECT. Errors: INVALID_RECORD_STATE for offsets that are not ACQUIRED by the acknowledging member (nothing of that
acknowledgement is applied), INVALID_REQUEST for a malformed batch.

Threading: every method takes the partition's lock; lock expiries run on the timer's thread. Persister futures are
chained, never waited on under the lock; a write takes its snapshot and hands it to the persister under a second
lock, so concurrent writes reach the persister in the order of their snapshots (a later state is never overwritten
by an earlier one).
"""

from __future__ import annotations

import bisect
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import NamedTuple

from pykbroker.coordinator.share.persister import Persister, PersisterStateBatch
from pykbroker.protocol import errors
from pykbroker.utils.timer import Timer, TimerTask

AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4

GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3

_ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED}


class FetchedBatch(NamedTuple):
    """The header facts of one log batch a ShareFetch read (offsets inclusive)."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


class AcquiredRange(NamedTuple):
    """One ``acquired_records`` entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AckBatch(NamedTuple):
    """One ``acknowledgement_batches`` entry: ``types`` has one type for the whole range or one per offset."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


class SharePartitionConfig(NamedTuple):
    """``record_lock_duration_ms``: acquisition lock (ms); ``delivery_count_limit``: deliveries before a record
    is archived; ``max_in_flight``: in-flight offsets at most; ``read_committed``: isolation of the share group;
    ``auto_offset_reset``: where a share partition without state starts (``latest`` / ``earliest``)."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000
    read_committed: bool = False
    auto_offset_reset: str = "latest"


class _Undo(NamedTuple):
    """A transition whose state write is pending (Kafka's InFlightState ongoing transition): the acknowledgement
    it belongs to (``token``) and the values it replaced; ``lock`` is -1 once that acquisition lock expired."""

    token: object
    state: int
    delivery_count: int
    member: str | None
    lock: int


class _Range:
    __slots__ = ("first", "last", "state", "count", "member", "lock", "undo")

    def __init__(self, first: int, last: int, state: int, count: int, member: str | None = None, lock: int = 0):
        self.first, self.last, self.state, self.count, self.member, self.lock = first, last, state, count, member, lock
        self.undo: _Undo | None = None

    def copy(self, first: int, last: int) -> _Range:
        r = _Range(first, last, self.state, self.count, self.member, self.lock)
        r.undo = self.undo
        return r

    def __repr__(self) -> str:
        return f"_Range({self.first}-{self.last}, state={self.state}, count={self.count}, member={self.member})"


class _LockTimeout(TimerTask):
    __slots__ = ("partition", "lock_id")

    def __init__(self, partition: SharePartition, lock_id: int, delay_ms: int):
        super().__init__(delay_ms)
        self.partition, self.lock_id = partition, lock_id

    def run(self) -> None:
        self.partition._expire_lock(self.lock_id)


class SharePartition:
    """The share-group delivery state of ``topic``-``partition`` for ``group_id`` (see the module docstring).

    ``timer`` runs acquisition-lock expiries; ``on_available()`` (optional) is called, outside the lock, when
    records became AVAILABLE again (the manager wakes parked ShareFetches)."""

    def __init__(
        self,
        group_id: str,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        config: SharePartitionConfig,
        persister: Persister,
        timer: Timer,
        on_available: Callable[[], None] | None = None,
    ):
        self.group_id, self.topic, self.topic_id, self.partition = group_id, topic, topic_id, partition
        self.leader_epoch = leader_epoch
        self.config = config
        self.persister = persister
        self.timer = timer
        self.on_available = on_available
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # orders the persister writes (taken before _lock, never inside it)
        self._ranges: list[_Range] = []  # sorted, disjoint, within [start_offset, end_offset)
        self._firsts: list[int] = []  # _ranges' first offsets (bisect)
        self.start_offset = -1
        self.end_offset = -1
        self.state_epoch = 0
        self.fenced = False
        self._next_lock = 0
        self._initialized: Future[int] | None = None

    # -- initialization ------------------------------------------------------------------------------
    def maybe_initialize(self, reset_offset: Callable[[], int]) -> Future[int]:
        """Load the persisted state once (``reset_offset()``: the start offset ``share.auto.offset.reset`` picks
        for a share partition without state). Future of an error code (NONE when ready)."""
        with self._lock:
            if self._initialized is not None:
                return self._initialized
            done: Future[int] = Future()
            self._initialized = done
        read = self.persister.read_state(self.group_id, self.topic_id, self.partition, self.leader_epoch)

        def loaded(f: Future) -> None:
            try:
                result = f.result()
                if result.error_code not in (errors.NONE, errors.UNKNOWN_TOPIC_OR_PARTITION):
                    self._fail_init(done, result.error_code)
                    return
                known = result.error_code == errors.NONE
                start = result.start_offset if known else -1
                batches = result.state_batches if known else ()
                fresh = start < 0
                if fresh:
                    start = reset_offset()
                with self._lock:
                    self.state_epoch = max(result.state_epoch, 0)
                    self._load(start, batches)
            except errors.KafkaError as e:  # the partition moved meanwhile (reset_offset)
                self._fail_init(done, e.code)
                return
            except Exception:  # noqa: BLE001 - a persister bug: the partition cannot be used
                self._fail_init(done, errors.UNKNOWN_SERVER_ERROR)
                return
            if not fresh:
                done.set_result(errors.NONE)
                return
            # the start offset share.auto.offset.reset chose is recorded, so that a new leader resumes from it
            if known:
                stored = self._write()
            else:
                stored = self.persister.initialize_state(
                    self.group_id, self.topic_id, self.partition, self.state_epoch, start
                )

            def recorded(w: Future) -> None:
                try:
                    code = w.result()
                except Exception:  # noqa: BLE001 - a persister bug
                    code = errors.UNKNOWN_SERVER_ERROR
                if code == errors.NONE:
                    done.set_result(errors.NONE)
                else:
                    self._fail_init(done, code)

            stored.add_done_callback(recorded)

        read.add_done_callback(loaded)
        return done

    def _fail_init(self, done: Future, code: int) -> None:
        with self._lock:
            self.fenced = code in (errors.FENCED_LEADER_EPOCH, errors.FENCED_STATE_EPOCH)
            self._initialized = None  # the next request tries again
        done.set_result(code)

    def _load(self, start: int, batches: Sequence[PersisterStateBatch]) -> None:
        self.start_offset = self.end_offset = start
        for b in sorted(batches):
            if b.last_offset < start:
                continue
            first = max(b.first_offset, start)
            if first > self.end_offset:  # a hole in the state: nothing there to deliver
                self._append(_Range(self.end_offset, first - 1, ARCHIVED, 0))
            state = AVAILABLE if b.delivery_state == ACQUIRED else b.delivery_state
            self._append(_Range(first, b.last_offset, state, b.delivery_count))
            self.end_offset = b.last_offset + 1
        self._advance_start()

    @property
    def initialized(self) -> bool:
        f = self._initialized
        return f is not None and f.done() and f.result() == errors.NONE

    # -- ranges --------------------------------------------------------------------------------------
    def _append(self, r: _Range) -> None:
        self._ranges.append(r)
        self._firsts.append(r.first)

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of a range (if it lies inside one)."""
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i < 0:
            return
        r = self._ranges[i]
        if r.first < offset <= r.last:
            tail = r.copy(offset, r.last)
            r.last = offset - 1
            self._ranges.insert(i + 1, tail)
            self._firsts.insert(i + 1, offset)

    def _slice(self, first: int, last: int) -> tuple[int, int]:
        """Split at ``first`` and ``last + 1``; the index range of the ranges covering [first, last]."""
        self._split_at(first)
        self._split_at(last + 1)
        lo = bisect.bisect_left(self._firsts, first)
        hi = bisect.bisect_right(self._firsts, last)
        return lo, hi

    def _advance_start(self) -> None:
        """Drop the leading ACKNOWLEDGED/ARCHIVED ranges: the SPSO moves past them (not past a pending write's)."""
        n = 0
        for r in self._ranges:
            if r.state not in (ACKNOWLEDGED, ARCHIVED) or r.undo is not None:
                break
            n += 1
        if n:
            self.start_offset = self._ranges[n - 1].last + 1
            del self._ranges[:n]
            del self._firsts[:n]
        if not self._ranges:
            self.start_offset = self.end_offset

    def _merge(self) -> None:
        """Join adjacent ranges in the same final or available state (keeps the range list short)."""
        out: list[_Range] = []
        for r in self._ranges:
            p = out[-1] if out else None
            if (
                p is not None
                and p.last + 1 == r.first
                and p.state == r.state
                and p.count == r.count
                and r.state != ACQUIRED
                and p.undo is None
                and r.undo is None
            ):
                p.last = r.last
            else:
                out.append(r)
        self._ranges = out
        self._firsts = [r.first for r in out]

    # -- fetch ---------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a ShareFetch reads the log from: the first AVAILABLE in-flight offset, else the end offset."""
        with self._lock:
            for r in self._ranges:
                if r.state == AVAILABLE:
                    return r.first
            return self.end_offset

    def can_acquire(self, log_end: int) -> bool:
        """Whether a fetch would find something to acquire with the log readable up to ``log_end`` (exclusive):
        an AVAILABLE in-flight record, or new records while fewer than ``max_in_flight`` are in flight."""
        with self._lock:
            if self.fenced or self.start_offset < 0:
                return False
            if any(r.state == AVAILABLE and r.undo is None for r in self._ranges):
                return True
            return self.end_offset < log_end and self.end_offset - self.start_offset < self.config.max_in_flight

    def update_log_start(self, log_start: int) -> None:
        """The log's start offset moved past the SPSO (retention, DeleteRecords): archive what is below it."""
        with self._lock:
            if log_start <= self.start_offset:
                return
            if log_start >= self.end_offset:
                self._ranges, self._firsts = [], []
                self.start_offset = self.end_offset = log_start
                return
            lo, hi = self._slice(self.start_offset, log_start - 1)
            for r in self._ranges[lo:hi]:
                r.state, r.member, r.undo = ARCHIVED, None, None
            self._advance_start()

    def acquire(
        self,
        member_id: str,
        batches: Sequence[FetchedBatch],
        max_records: int,
        aborted: Sequence = (),
        batch_size: int = 0,
    ) -> list[AcquiredRange]:
        """Acquire for ``member_id`` the offsets of the fetched ``batches`` that are AVAILABLE or new, whole batches
        until ``max_records`` (<= 0: no limit) are acquired. ``aborted``: the read_committed read's aborted
        transactions (``producer_id``, ``first_offset``, ``last_offset``): their batches are archived, as control
        batches are. Starts the acquisition lock; returns the acquired ranges (ascending), contiguous ones of one
        delivery count joined into ranges of at most ``batch_size`` records (ShareFetch ``batch_size``; <= 0: no
        limit), split only at log batch boundaries (Kafka's SharePartition.createBatches: a range may exceed it by
        one log batch)."""
        out: list[AcquiredRange] = []
        became_final = False
        with self._lock:
            if self.fenced or self.start_offset < 0:
                return out
            lock_id = self._next_lock = self._next_lock + 1
            limit = max_records if max_records > 0 else 2**31
            acquired = 0
            for b in batches:
                if acquired >= limit:
                    break
                if b.last_offset < self.start_offset:
                    continue
                skip = b.is_control or (self.config.read_committed and _is_aborted(b, aborted))
                # in-flight part: AVAILABLE offsets are acquired again (count + 1)
                in_flight_last = min(b.last_offset, self.end_offset - 1)
                first = max(b.base_offset, self.start_offset)
                if first <= in_flight_last:
                    lo, hi = self._slice(first, in_flight_last)
                    for r in self._ranges[lo:hi]:
                        if r.state != AVAILABLE or r.undo is not None:  # a release whose write is pending
                            continue
                        if skip:
                            r.state, became_final = ARCHIVED, True
                            continue
                        r.state, r.count, r.member, r.lock = ACQUIRED, r.count + 1, member_id, lock_id
                        out.append(AcquiredRange(r.first, r.last, r.count))
                        acquired += r.last - r.first + 1
                # new part: offsets never delivered
                if b.last_offset >= self.end_offset:
                    if not skip and self.end_offset - self.start_offset >= self.config.max_in_flight:
                        break
                    first = max(b.base_offset, self.end_offset)
                    if first > self.end_offset:  # no records between (compaction, a gap in the log)
                        self._append(_Range(self.end_offset, first - 1, ARCHIVED, 0))
                        became_final = True
                    if skip:
                        self._append(_Range(first, b.last_offset, ARCHIVED, 0))
                        became_final = True
                    else:
                        self._append(_Range(first, b.last_offset, ACQUIRED, 1, member_id, lock_id))
                        out.append(AcquiredRange(first, b.last_offset, 1))
                        acquired += b.last_offset - first + 1
                    self.end_offset = b.last_offset + 1
            if became_final:
                self._advance_start()
            if out:
                self.timer.add(_LockTimeout(self, lock_id, self.config.record_lock_duration_ms))
            out = _join(out, batch_size)
        if became_final:  # archived (aborted, control, gap) offsets; an acquisition alone is not written
            self._write()
        return out

    # -- acknowledgement -----------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> Future[int]:
        """Apply ``member_id``'s acknowledgements; all or nothing. Future of an error code: INVALID_RECORD_STATE
        (an offset not ACQUIRED by the member), INVALID_REQUEST (bad type or range), or the persister's error.

        The transitions are pending until the state write completes (Kafka's rollbackOrProcessStateUpdates): a
        released record is not acquired again and the SPSO does not move meanwhile; when the write fails they are
        undone (the records are ACQUIRED by the member again, or released if their lock expired meanwhile) and the
        write's error is the answer."""
        token = object()
        with self._lock:
            if self.fenced:
                return _done(errors.FENCED_STATE_EPOCH)
            code = self._validate(member_id, batches)
            if code != errors.NONE:
                return _done(code)
            for b in batches:
                if len(b.types) == 1:
                    self._set_acked(b.first_offset, b.last_offset, b.types[0], token)
                else:
                    for i, t in enumerate(b.types):
                        self._set_acked(b.first_offset + i, b.first_offset + i, t, token)
        out: Future[int] = Future()

        def written(w: Future[int]) -> None:
            code = w.result()
            released = self._complete_transitions(token, code == errors.NONE)
            if released and self.on_available is not None:
                self.on_available()
            out.set_result(code)

        self._write().add_done_callback(written)
        return out

    def _complete_transitions(self, token: object, ok: bool) -> bool:
        """End ``token``'s pending transitions: kept when ``ok``, else undone. True when records became AVAILABLE."""
        released = False
        with self._lock:
            for r in self._ranges:
                u = r.undo
                if u is None or u.token is not token:
                    continue
                r.undo = None
                if ok:
                    released |= r.state == AVAILABLE
                    continue
                r.state, r.count, r.member, r.lock = u.state, u.delivery_count, u.member, u.lock
                if u.lock < 0:  # its acquisition lock expired (or its member left) during the write
                    released |= self._release(r)
            self._advance_start()
            self._merge()
        return released

    def _validate(self, member_id: str, batches: Sequence[AckBatch]) -> int:
        for b in batches:
            if b.last_offset < b.first_offset or not b.types:
                return errors.INVALID_REQUEST
            if len(b.types) not in (1, b.last_offset - b.first_offset + 1):
                return errors.INVALID_REQUEST
            if any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in b.types):
                return errors.INVALID_REQUEST
            if b.first_offset < self.start_offset or b.last_offset >= self.end_offset:
                return errors.INVALID_RECORD_STATE
            i = bisect.bisect_right(self._firsts, b.first_offset) - 1
            covered = b.first_offset
            while i < len(self._ranges) and covered <= b.last_offset:
                r = self._ranges[i]
                if r.state != ACQUIRED or r.member != member_id or r.first > covered:
                    return errors.INVALID_RECORD_STATE
                covered = r.last + 1
                i += 1
            if covered <= b.last_offset:
                return errors.INVALID_RECORD_STATE
        return errors.NONE

    def _set_acked(self, first: int, last: int, ack_type: int, token: object) -> None:
        lo, hi = self._slice(first, last)
        for r in self._ranges[lo:hi]:
            r.undo = _Undo(token, r.state, r.count, r.member, r.lock)
            if ack_type == RELEASE:
                self._release(r)
            else:
                r.state, r.member, r.lock = _ACK_STATE[ack_type], None, 0

    def _release(self, r: _Range) -> bool:
        """ACQUIRED -> AVAILABLE, or ARCHIVED at the delivery count limit. True when it became AVAILABLE."""
        r.member, r.lock = None, 0
        if r.count >= self.config.delivery_count_limit:
            r.state = ARCHIVED
            return False
        r.state = AVAILABLE
        return True

    def release_member(self, member_id: str) -> Future[int]:
        """Release every record ``member_id`` holds (its share session closed or it left the group)."""
        released = False
        with self._lock:
            for r in self._ranges:
                if r.state == ACQUIRED and r.member == member_id:
                    released |= self._release(r)
                elif r.undo is not None and r.undo.member == member_id:  # released too if its write fails
                    r.undo = r.undo._replace(lock=-1)
            self._advance_start()
            self._merge()
        if released and self.on_available is not None:
            self.on_available()
        return self._write()

    def _expire_lock(self, lock_id: int) -> None:
        """An acquisition lock expired (timer thread): its still-ACQUIRED records are released."""
        released = changed = False
        with self._lock:
            for r in self._ranges:
                if r.state == ACQUIRED and r.lock == lock_id:
                    released |= self._release(r)
                    changed = True
                elif r.undo is not None and r.undo.lock == lock_id:  # released too if its write fails
                    r.undo = r.undo._replace(lock=-1)
            if changed:
                self._advance_start()
                self._merge()
        if changed:
            self._write()
        if released and self.on_available is not None:
            self.on_available()

    # -- persistence ---------------------------------------------------------------------------------
    def _write(self) -> Future[int]:
        """Write the SPSO and the in-flight state (ACQUIRED as AVAILABLE); a fenced write fences the partition."""
        with self._write_lock:  # snapshots reach the persister in the order they were taken
            with self._lock:
                if self.fenced:
                    return _done(errors.FENCED_STATE_EPOCH)
                # pending transitions are written as done: the SPSO moves past pending final ranges too
                n = 0
                for r in self._ranges:
                    if r.state not in (ACKNOWLEDGED, ARCHIVED):
                        break
                    n += 1
                start = self._ranges[n - 1].last + 1 if n else self.start_offset
                batches = tuple(
                    PersisterStateBatch(r.first, r.last, AVAILABLE if r.state == ACQUIRED else r.state, r.count)
                    for r in self._ranges[n:]
                )
                # KIP-1226: in-flight offsets whose delivery is complete (the describe's lag leaves them out)
                complete = sum(r.last - r.first + 1 for r in self._ranges[n:] if r.state in (ACKNOWLEDGED, ARCHIVED))
            f = self.persister.write_state(
                self.group_id,
                self.topic_id,
                self.partition,
                self.state_epoch,
                self.leader_epoch,
                start,
                batches,
                complete,
            )
        out: Future[int] = Future()

        def written(w: Future) -> None:
            try:
                code = w.result()
            except Exception:  # noqa: BLE001 - a persister bug: answer the acknowledgement with an error
                code = errors.UNKNOWN_SERVER_ERROR
            if code in (errors.FENCED_LEADER_EPOCH, errors.FENCED_STATE_EPOCH):
                with self._lock:
                    self.fenced = True
            out.set_result(code)

        f.add_done_callback(written)
        return out

    # -- inspection (tests, describe) ----------------------------------------------------------------
    def snapshot(self) -> list[tuple[int, int, int, int, str | None]]:
        """The in-flight ranges as ``(first, last, state, delivery_count, member)``."""
        with self._lock:
            return [(r.first, r.last, r.state, r.count, r.member) for r in self._ranges]


def _is_aborted(b: FetchedBatch, aborted: Sequence) -> bool:
    if not b.is_transactional:
        return False
    return any(t.producer_id == b.producer_id and t.first_offset <= b.base_offset <= t.last_offset for t in aborted)


def _join(ranges: list[AcquiredRange], batch_size: int = 0) -> list[AcquiredRange]:
    """Contiguous ranges of one delivery count joined; with ``batch_size`` > 0 a range is closed once it holds at least
    ``batch_size`` records (the next one starts at the next log batch)."""
    out: list[AcquiredRange] = []
    for r in ranges:
        if (
            out
            and out[-1].last_offset + 1 == r.first_offset
            and out[-1].delivery_count == r.delivery_count
            and (batch_size <= 0 or r.first_offset - out[-1].first_offset < batch_size)
        ):
            out[-1] = out[-1]._replace(last_offset=r.last_offset)
        else:
            out.append(r)
    return out


def _done(code: int) -> Future[int]:
    f: Future[int] = Future()
    f.set_result(code)
    return f
