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

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import enum
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
