"""Fault handlers (Kafka's ``org.apache.kafka.server.fault``): what a component does with a fault it
cannot recover from.

* :class:`FaultHandler` - the interface: ``handle_fault(message, cause)``.
* :class:`ProcessTerminatingFaultHandler` - Kafka's: log ``Encountered fatal fault: <message>`` at ERROR
  with the cause, run an optional action, then halt with exit code 1 (``os._exit``: no shutdown hooks,
  as ``Exit.halt``; an orderly shutdown could block on the very resource that failed). The halt is
  injectable, so an embedding program or a test decides what "halt" means.

Thread-safe: called on the thread that met the fault.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from pykbroker.utils.logging import get_logger


class FaultHandler(Protocol):
    def handle_fault(self, message: str, cause: BaseException | None = None) -> None:
        """Handle a fault described by ``message`` (and ``cause``, when an exception caused it). A
        terminating handler does not return."""


class ProcessTerminatingFaultHandler:
    """Kafka's ``ProcessTerminatingFaultHandler`` with ``shouldHalt`` = true. ``halt(exit_code)``:
    ``os._exit`` by default; ``action`` runs first (its failure is logged, then the halt happens anyway)."""

    def __init__(self, halt: Callable[[int], None] = os._exit, action: Callable[[], None] | None = None):
        self._halt = halt
        self._action = action
        self._log = get_logger("ProcessTerminatingFaultHandler")

    def handle_fault(self, message: str, cause: BaseException | None = None) -> None:
        if cause is None:
            self._log.error(f"Encountered fatal fault: {message}")
        else:
            self._log.error(f"Encountered fatal fault: {message}: {cause}", exc_info=cause)
        if self._action is not None:
            try:
                self._action()
            except Exception:  # noqa: BLE001 - the halt happens regardless
                self._log.exception("Failed to run terminating action.")
        self._halt(1)
