"""BrokerHeartbeatManager: broker sessions as the active controller sees them (Kafka's
``BrokerHeartbeatManager``).

Only the active controller has one (``ClusterControlManager.activate`` builds it and treats every
registered broker as having just heartbeated). Per broker it keeps the last contact time (monotonic ms of
the injected ``Time``), the last metadata offset the broker reported and, while the broker is in
controlled shutdown, the offset of the batch that started it (``controlled_shutdown_offset``, -1 when
not shutting down). A broker is *fenced* here when it is not in the unfenced list; *active* when unfenced
and not shutting down.

- The unfenced brokers are kept in order of last contact (an insertion-ordered dict: contact times come
  from a monotonic clock, so a touched broker always goes last). A broker's session is valid while
  ``last_contact_ms + session_timeout_ms >= now``; :meth:`next_check_time_ms` is the earliest expiry and
  :meth:`find_one_stale_broker` the oldest broker whose session expired.
- :meth:`calculate_next_broker_state` is Kafka's heartbeat state machine over
  :class:`BrokerControlState` (FENCED, UNFENCED, CONTROLLED_SHUTDOWN, SHUTDOWN_NOW).
- Time the controller itself did not run does not count against a session: :meth:`credit_stall` moves
  every last contact forward by the stall (to now at most; a stall of a whole session timeout or more
  resets every session to now), and :meth:`note_contact` takes a heartbeat that was received (see
  :class:`BrokerHeartbeatTracker`) but is still waiting in the controller's queue.

Not thread-safe: used on the controller's event thread. :class:`BrokerHeartbeatTracker` is thread-safe.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import Time

NO_OFFSET = -1
MAX_OFFSET = 2**63 - 1


class BrokerControlState(enum.Enum):
    """Kafka's ``BrokerControlState``: ``(fenced, in_controlled_shutdown, should_shut_down)``."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self.value[1]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


@dataclass
class BrokerHeartbeatState:
    id: int
    last_contact_ms: int = 0
    metadata_offset: int = NO_OFFSET
    controlled_shutdown_offset: int = NO_OFFSET
    fenced: bool = True

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeatTracker:
    """When each broker's latest heartbeat was *received* (before the controller's event thread gets to
    it), as Kafka's ``BrokerHeartbeatTracker`` records contact times outside the event queue: a heartbeat
    stuck behind a slow event still proves the broker alive. Keyed by broker id, with the broker epoch the
    heartbeat carried (a heartbeat of another registration proves nothing). Times: monotonic ms of the
    controller's ``Time``. Thread-safe: :meth:`record` is called on request handler threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._received: dict[int, tuple[int, int]] = {}  # broker id -> (broker epoch, received ms)

    def record(self, broker_id: int, broker_epoch: int, received_ms: int) -> None:
        with self._lock:
            self._received[broker_id] = (broker_epoch, received_ms)

    def last_received_ms(self, broker_id: int, broker_epoch: int) -> int | None:
        """When the latest heartbeat of ``broker_id`` with ``broker_epoch`` was received; None if the
        latest one carried another epoch or none was received."""
        with self._lock:
            entry = self._received.get(broker_id)
        return entry[1] if entry is not None and entry[0] == broker_epoch else None


class BrokerHeartbeatManager:
    def __init__(self, time: Time, session_timeout_ms: int):
        self.time = time
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerHeartbeatState] = {}
        self._unfenced: dict[int, BrokerHeartbeatState] = {}  # ordered by last contact, oldest first
        self._log = get_logger("BrokerHeartbeatManager")

    # ---- state changes -----------------------------------------------------------------------
    def register(self, broker_id: int, fenced: bool) -> None:
        """Track ``broker_id`` (if new) and make its fencing state ``fenced``; counts as a contact."""
        broker = self.brokers.get(broker_id)
        metadata_offset = NO_OFFSET
        if broker is None:
            self.brokers[broker_id] = BrokerHeartbeatState(broker_id)
        elif broker.fenced != fenced:
            metadata_offset = broker.metadata_offset
        self.touch(broker_id, fenced, metadata_offset)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int) -> None:
        """A contact from ``broker_id`` now; a fenced broker leaves controlled shutdown. Raises
        KeyError if the broker is not tracked."""
        broker = self.brokers[broker_id]
        self._unfenced.pop(broker_id, None)
        broker.last_contact_ms = self.time.hi_res_milliseconds()
        broker.metadata_offset = metadata_offset
        broker.fenced = fenced
        if fenced:
            broker.controlled_shutdown_offset = NO_OFFSET
        else:
            self._unfenced[broker_id] = broker

    def fence(self, broker_id: int) -> None:
        broker = self.brokers.get(broker_id)
        if broker is not None:
            self._unfenced.pop(broker_id, None)
            broker.fenced = True

    def note_contact(self, broker_id: int, at_ms: int) -> bool:
        """A heartbeat from unfenced ``broker_id`` was received at ``at_ms`` (monotonic ms) and is not
        processed yet: its session runs from then, if that is later than its last contact. True if that
        moved the session."""
        broker = self._unfenced.get(broker_id)
        if broker is None or at_ms <= broker.last_contact_ms:
            return False
        broker.last_contact_ms = at_ms
        self._unfenced = dict(sorted(self._unfenced.items(), key=lambda item: item[1].last_contact_ms))
        return True

    def credit_stall(self, stalled_ms: int) -> None:
        """The controller did not run for ``stalled_ms`` (ms): no heartbeat could be processed then, so
        every last contact moves forward by that much, to now at most; a stall of a whole session
        timeout or more resets every session to now (a grace period). Order by last contact is kept."""
        now = self.time.hi_res_milliseconds()
        for broker in self.brokers.values():
            if stalled_ms >= self.session_timeout_ms:
                broker.last_contact_ms = now
            else:
                broker.last_contact_ms = min(now, broker.last_contact_ms + stalled_ms)

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self._unfenced.pop(broker_id, None)

    def maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        """Record the offset at which ``broker_id``'s controlled shutdown started (first call only)."""
        broker = self.brokers[broker_id]
        if broker.fenced:
            raise RuntimeError("Fenced brokers cannot enter controlled shutdown.")
        if broker.controlled_shutdown_offset < 0:
            broker.controlled_shutdown_offset = offset
            self._log.debug("Updated the controlled shutdown offset", broker=broker_id, offset=offset)

    # ---- queries -----------------------------------------------------------------------------
    def has_valid_session(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and self._valid(broker)

    def _valid(self, broker: BrokerHeartbeatState) -> bool:
        return not broker.fenced and broker.last_contact_ms + self.session_timeout_ms >= self.time.hi_res_milliseconds()

    def controlled_shutdown_offset(self, broker_id: int) -> int:
        broker = self.brokers.get(broker_id)
        return broker.controlled_shutdown_offset if broker is not None else NO_OFFSET

    def next_check_time_ms(self) -> int | None:
        """Monotonic ms when the oldest unfenced session expires; None with no unfenced broker."""
        oldest = next(iter(self._unfenced.values()), None)
        return None if oldest is None else oldest.last_contact_ms + self.session_timeout_ms

    def find_one_stale_broker(self) -> int | None:
        """The unfenced broker with the oldest contact, if its session expired."""
        oldest = next(iter(self._unfenced.values()), None)
        return oldest.id if oldest is not None and not self._valid(oldest) else None

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset reported by an active (unfenced, not shutting down) broker."""
        offsets = [b.metadata_offset for b in self._unfenced.values() if not b.shutting_down]
        return min(offsets) if offsets else MAX_OFFSET

    def current_state(self, broker_id: int) -> BrokerControlState:
        broker = self.brokers[broker_id]
        if broker.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if broker.fenced else BrokerControlState.UNFENCED

    def calculate_next_broker_state(
        self,
        broker_id: int,
        request: dict,
        register_broker_record_offset: int,
        has_leaderships: Callable[[], bool],
    ) -> tuple[BrokerControlState, BrokerControlState]:
        """``(current, next)`` state of a broker that sent BrokerHeartbeat ``request``
        (``current_metadata_offset``, ``want_fence``, ``want_shut_down``)."""
        broker = self.brokers[broker_id]
        current = self.current_state(broker_id)
        want_fence = bool(request.get("want_fence"))
        want_shut_down = bool(request.get("want_shut_down"))
        S = BrokerControlState
        if current is S.FENCED:
            if want_shut_down:
                self._log.info("Fenced broker has requested and been granted an immediate shutdown", broker=broker_id)
                return current, S.SHUTDOWN_NOW
            if not want_fence and int(request["current_metadata_offset"]) >= register_broker_record_offset:
                self._log.info(
                    "The request to unfence has been granted: the broker caught up with its registration",
                    broker=broker_id,
                    registration_offset=register_broker_record_offset,
                )
                return current, S.UNFENCED
            return current, S.FENCED
        if current is S.UNFENCED:
            if want_fence:
                return current, S.SHUTDOWN_NOW if want_shut_down else S.FENCED
            if want_shut_down:
                return current, S.CONTROLLED_SHUTDOWN if has_leaderships() else S.SHUTDOWN_NOW
            return current, S.UNFENCED
        # CONTROLLED_SHUTDOWN
        if has_leaderships():
            return current, S.CONTROLLED_SHUTDOWN
        lowest = self.lowest_active_offset()
        if broker.controlled_shutdown_offset <= lowest:
            self._log.info(
                "The request to shut down has been granted",
                broker=broker_id,
                lowest_active_offset=lowest,
                controlled_shutdown_offset=broker.controlled_shutdown_offset,
            )
            return current, S.SHUTDOWN_NOW
        return current, S.CONTROLLED_SHUTDOWN
