"""The Raft IO thread (Kafka's ``KafkaRaftClientDriver``): ``kafka-<nodeId>-raft-io-thread``.

Threading: one daemon thread calls ``client.poll()`` until :meth:`shutdown`; the client's listeners are
called on it. ``start``/``shutdown`` are called by the owner (the server's start-up and shut-down path).
"""

from __future__ import annotations

import threading

from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.utils.logging import get_logger


class KafkaRaftClientDriver:
    def __init__(self, client: KafkaRaftClient, thread_name: str | None = None):
        self.client = client
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
        try:
            while self._running.is_set():
                self.client.poll()
        except Exception:  # noqa: BLE001
            self._log.exception("Unexpected error in the Raft IO thread; it stops")
            raise
        finally:
            self.client.close()

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
