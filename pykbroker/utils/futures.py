"""Completing a ``concurrent.futures.Future`` that may already be done or cancelled.

Controller operations are completed from whichever comes first (a commit, a leader change, a timeout, a
retry's answer); the later ones must be no-ops, not ``InvalidStateError``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any


def set_result_if_pending(future: Future, value: Any) -> None:
    """``future.set_result(value)`` unless the future is already done or cancelled meanwhile."""
    if not future.done():
        try:
            future.set_result(value)
        except Exception:  # noqa: BLE001 - completed or cancelled meanwhile
            pass


def set_exception_if_pending(future: Future, error: BaseException) -> None:
    """``future.set_exception(error)`` unless the future is already done or cancelled meanwhile."""
    if not future.done():
        try:
            future.set_exception(error)
        except Exception:  # noqa: BLE001 - completed or cancelled meanwhile
            pass
