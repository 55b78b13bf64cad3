"""BrokerLifecycleManager: a broker's registration and heartbeats with the active controller (Kafka's
``BrokerLifecycleManager``).

1. ``start(registration)`` sends BrokerRegistration (62) to the active controller, retrying until it is
   accepted. ``registered`` then completes with the broker epoch. DUPLICATE_BROKER_REGISTRATION (the
   previous incarnation's session is still live after a kill -9) is retried until that session expires;
   another non-retriable refusal (INCONSISTENT_CLUSTER_ID, ...) completes it with the error.
2. From then on it sends BrokerHeartbeat (63) with the offset of the metadata this broker has applied.
   A broker starts fenced. The controller says when it has caught up (``caught_up`` is set) and then
   unfences it (``unfenced`` is set; cleared again if the controller fences it). Heartbeats go every
   ``broker.heartbeat.interval.ms``. While fenced they go at least every 100 ms, so a starting broker
   is unfenced soon after it catches up. Kafka sends the next heartbeat right away in that state.
   STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED means the controller no longer knows this
   registration, so the broker registers again.
3. ``propagate_directory_failure(directory_id)`` (KIP-858, Kafka's ``propagateDirectoryFailure``): a failed log
   dir's id goes in every heartbeat's ``offline_log_dirs`` from then on, and a heartbeat is sent at once; the
   controller moves the leadership of the partitions in it to other replicas. When no heartbeat carrying it was
   answered within ``log.dir.failure.timeout.ms`` (``failure_timeout_ms``), ``on_fatal(message)`` is called (the
   broker halts: its replicas there could lead on otherwise).
4. ``begin_controlled_shutdown()`` sets ``want_shut_down`` on the heartbeats until the controller answers
   ``should_shut_down`` (``shutdown_ready`` is set): by then it has moved leadership away from this
   broker. ``close()`` stops the heartbeats.

Threading: the work runs on the NodeToControllerChannelManager's send thread (responses and timers). The
public methods and the events are thread-safe.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.node_to_controller_channel_manager import NodeToControllerChannelManager
from pykbroker.utils.futures import set_exception_if_pending, set_result_if_pending
from pykbroker.utils.logging import get_logger

FENCED_HEARTBEAT_INTERVAL_MS = 100
REGISTRATION_RETRY_MS = 200


class BrokerRegistrationError(RuntimeError):
    """The controller refused the registration for a reason that retrying cannot fix."""

    def __init__(self, code: int, message: str | None):
        self.code = code
        super().__init__(f"{errors.name_of(code)}: {message or errors.for_code(code).default_message}")


class BrokerLifecycleManager:
    def __init__(
        self,
        node_id: int,
        channel: NodeToControllerChannelManager,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        failure_timeout_ms: int = 30000,
        on_fatal: Callable[[str], None] | None = None,
    ):
        self.node_id = node_id
        self.channel = channel
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_offset = metadata_offset
        self._log = get_logger("BrokerLifecycleManager", nodeId=node_id)
        self.registered: Future = Future()
        self.caught_up = threading.Event()
        self.unfenced = threading.Event()
        self.shutdown_ready = threading.Event()
        self.broker_epoch = -1
        self._registration: dict | None = None
        self._want_shut_down = False
        self._closed = False
        self._offline_dirs: list[uuid.UUID] = []
        self.failure_timeout_ms = failure_timeout_ms
        self.on_fatal = on_fatal
        #: the offline dirs a heartbeat answered without error has carried (Kafka's ``offlineDirs`` values)
        self._acknowledged_dirs: set[uuid.UUID] = set()
        # send thread only: one heartbeat in flight at a time; a scheduled heartbeat of an older generation is
        # dropped (a heartbeat sent right away replaced it); _immediate: send the next one as soon as this is answered
        self._hb_generation = 0
        self._hb_in_flight = False
        self._immediate = False
        self._sent_offline_dirs: list[uuid.UUID] = []

    # ---- public API ---------------------------------------------------------------------------
    def start(self, registration: dict) -> Future:
        """Register with ``registration`` (BrokerRegistration request fields); returns ``registered``."""
        self._registration = registration
        self._send_registration()
        return self.registered

    def begin_controlled_shutdown(self) -> None:
        self._want_shut_down = True
        if self.broker_epoch < 0:
            self.shutdown_ready.set()
            return
        self.channel.send_thread.schedule(0, self._heartbeat_now)

    def propagate_directory_failure(self, directory_id: uuid.UUID) -> None:
        """Report the log dir ``directory_id`` offline in the heartbeats from now on, starting with one sent now."""
        if directory_id in self._offline_dirs:
            return
        self._offline_dirs = [*self._offline_dirs, directory_id]
        self._log.warning(f"Reporting log directory {directory_id} offline to the controller")
        if self.broker_epoch >= 0:
            self.channel.send_thread.schedule(0, self._heartbeat_now)
        self.channel.send_thread.schedule(self.failure_timeout_ms, lambda: self._check_acknowledged(directory_id))

    def _check_acknowledged(self, directory_id: uuid.UUID) -> None:
        """Kafka's ``OfflineDirBrokerFailureEvent``."""
        if directory_id not in self._acknowledged_dirs and not self._closed:
            message = f"Shutting down because couldn't communicate offline log dir {directory_id} with controllers"
            self._log.error(message)
            if self.on_fatal is not None:
                self.on_fatal(message)

    def close(self) -> None:
        self._closed = True

    # ---- send thread --------------------------------------------------------------------------
    def _send_registration(self) -> None:
        if self._closed:
            return
        assert self._registration is not None
        # previous_broker_epoch: the registration's (the epoch of the last clean shutdown, Kafka's
        # readBrokerEpochFromCleanShutdownFiles), the same on every attempt of this incarnation
        body = {"previous_broker_epoch": -1, **self._registration}
        # KIP-858: a registration sent again (the controller lost this one) leaves out the failed log dirs
        body["log_dirs"] = [d for d in body.get("log_dirs") or () if d not in self._offline_dirs]
        future = self.channel.send_request(ApiKeys.BROKER_REGISTRATION, 4, body, REGISTRATION_RETRY_MS * 10)
        future.add_done_callback(self._on_registration)

    def _on_registration(self, future: Future) -> None:
        try:
            response = future.result()
        except Exception as e:  # noqa: BLE001 - timeouts: keep trying
            self._log.debug("Broker registration not answered; retrying", error=str(e))
            self.channel.send_thread.schedule(REGISTRATION_RETRY_MS, self._send_registration)
            return
        code = response["error_code"]
        if code != errors.NONE:
            if errors.for_code(code).retriable or code in (errors.NOT_CONTROLLER, errors.DUPLICATE_BROKER_REGISTRATION):
                # DUPLICATE_BROKER_REGISTRATION: the previous incarnation's session (a kill -9 and a quick
                # restart) is still live; it expires within broker.session.timeout.ms (Kafka retries all).
                self._log.info(f"Unable to register broker {self.node_id}: {errors.name_of(code)}; retrying")
                self.channel.send_thread.schedule(REGISTRATION_RETRY_MS, self._send_registration)
                return
            error = BrokerRegistrationError(code, response.get("error_message"))
            self._log.error(f"Unable to register broker {self.node_id}: {error}")
            set_exception_if_pending(self.registered, error)
            return
        self.broker_epoch = response["broker_epoch"]
        self._log.info(f"Successfully registered broker {self.node_id} with broker epoch {self.broker_epoch}")
        set_result_if_pending(self.registered, self.broker_epoch)
        self._send_heartbeat()

    def _heartbeat_now(self) -> None:
        """Send a heartbeat now, or right after the one in flight is answered (Kafka's
        ``scheduleNextCommunicationImmediately``)."""
        if self._hb_in_flight:
            self._immediate = True
            return
        self._hb_generation += 1
        self._send_heartbeat()

    def _send_heartbeat(self, generation: int | None = None) -> None:
        if self._closed or self._hb_in_flight or (generation is not None and generation != self._hb_generation):
            return
        self._hb_in_flight = True
        self._sent_offline_dirs = list(self._offline_dirs)
        body = {
            "broker_id": self.node_id,
            "broker_epoch": self.broker_epoch,
            "current_metadata_offset": self.metadata_offset(),
            "want_fence": False,
            "want_shut_down": self._want_shut_down,
            "offline_log_dirs": list(self._offline_dirs),
        }
        timeout = max(self.heartbeat_interval_ms, 1000)
        future = self.channel.send_request(ApiKeys.BROKER_HEARTBEAT, 1, body, timeout)
        future.add_done_callback(self._on_heartbeat)

    def _on_heartbeat(self, future: Future) -> None:
        self._hb_in_flight = False
        try:
            response = future.result()
        except Exception as e:  # noqa: BLE001 - timeouts, lost connection: heartbeat again
            self._log.debug("Broker heartbeat not answered", error=str(e))
            self._schedule_heartbeat()
            return
        code = response["error_code"]
        if code in (errors.STALE_BROKER_EPOCH, errors.BROKER_ID_NOT_REGISTERED):
            self._log.warning(
                f"The controller no longer knows this registration ({errors.name_of(code)}); registering again"
            )
            self.unfenced.clear()
            self.channel.send_thread.schedule(0, self._send_registration)
            return
        if code == errors.NONE:
            self._acknowledged_dirs.update(self._sent_offline_dirs)
            if response.get("is_caught_up"):
                if not self.caught_up.is_set():
                    self._log.info("The broker has caught up. Transitioning from STARTING to RECOVERY.")
                self.caught_up.set()
            if response.get("is_fenced", True):
                if self.unfenced.is_set():
                    self._log.warning("The controller fenced this broker")
                self.unfenced.clear()
            elif not self.unfenced.is_set():
                self._log.info("The broker has been unfenced. Transitioning from RECOVERY to RUNNING.")
                self.unfenced.set()
            if self._want_shut_down and response.get("should_shut_down"):
                self._log.info("The controller has asked us to exit controlled shutdown.")
                self.shutdown_ready.set()
                return
        self._schedule_heartbeat()

    def _schedule_heartbeat(self) -> None:
        interval = self.heartbeat_interval_ms
        if not self.unfenced.is_set() or self._want_shut_down:
            interval = min(interval, FENCED_HEARTBEAT_INTERVAL_MS)
        if self._immediate:
            self._immediate, interval = False, 0
        generation = self._hb_generation
        self.channel.send_thread.schedule(interval, lambda: self._send_heartbeat(generation))
