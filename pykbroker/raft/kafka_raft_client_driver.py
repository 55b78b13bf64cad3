"""The Raft IO thread (Kafka's ``KafkaRaftClientDriver``): ``kafka-<nodeId>-raft-io-thread``.

Threading: one daemon thread calls ``client.poll()`` until :meth:`shutdown`; the client's listeners are
called on it. ``start``/``shutdown`` are called by the owner (the server's start-up and shut-down path).
After each poll the thread hands the client's outbound RPCs to the :class:`NetworkChannel` (Kafka's
``NetworkChannel``), whose owner delivers the answers back with ``client.handle``. A single voter sends
nothing and needs no channel.

Any error out of a poll - an append or flush of the metadata log that failed (a full disk: ENOSPC), a
quorum-state file that cannot be written - goes to the ``fatal_fault_handler`` as "Unexpected error in
raft IO thread" (Kafka's ``KafkaRaftClientDriver.doWork``); a server's halts the process with exit code 1,
so no controller goes on accepting writes it cannot persist and the other voters elect a leader. Without
a handler (a test) the thread logs the error and stops.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.raft_messages import RaftMessage
from pykbroker.utils.fault_handler import FaultHandler
from pykbroker.utils.logging import get_logger


class NetworkChannel(ABC):
    """Carries the Raft RPCs between nodes. ``send`` is called on the Raft IO thread and must not block;
    a message that cannot be delivered is dropped (the client times requests out and retries)."""

    @abstractmethod
    def send(self, message: RaftMessage) -> None: ...


class KafkaRaftClientDriver:
    def __init__(
        self,
        client: KafkaRaftClient,
        thread_name: str | None = None,
        channel: NetworkChannel | None = None,
        fatal_fault_handler: FaultHandler | None = None,
    ):
        self.client = client
        self.channel = channel
        self.fatal_fault_handler = fatal_fault_handler
        self.thread_name = thread_name or f"kafka-{client.node_id}-raft-io-thread"
        self._running = threading.Event()
        self._thread: threading.Thread | None = None
        self._log = get_logger("KafkaRaftClientDriver", nodeId=client.node_id)

    def start(self) -> None:
        """Initialise the client on the caller's thread (so a bad quorum-state file fails start-up) and
        start polling."""
        self.client.initialize()
        self._running.set()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failed = False
        try:
            while self._running.is_set():
                wait_ms = self.client.poll_once()
                self._send_outbound()
                metrics = self.client.metrics
                if metrics is not None:
                    metrics.update_poll_start(self.client.time.milliseconds())
                self.client.await_wakeup(wait_ms)
                if metrics is not None:
                    metrics.update_poll_end(self.client.time.milliseconds())
        except Exception as e:
            failed = True
            if self.fatal_fault_handler is None:
                self._log.exception("Unexpected error in the Raft IO thread; it stops")
                raise
            self.fatal_fault_handler.handle_fault("Unexpected error in raft IO thread", e)
        finally:
            try:
                self.client.close()
                self._send_outbound()  # a resigning leader's EndQuorumEpoch
            except Exception:
                if not failed:
                    raise
                self._log.exception("Closing the Raft client after a fatal fault failed")

    def _send_outbound(self) -> None:
        messages = self.client.drain_outbound()
        if self.channel is None:
            if messages:
                self._log.warning("No network channel: Raft messages dropped", messages=len(messages))
            return
        for message in messages:
            self.channel.send(message)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop polling after writing queued appends; waits up to ``timeout_s`` for the thread."""
        self.client.begin_shutdown()
        self._running.clear()
        self.client.wakeup()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    @property
    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
