"""The (session id, epoch) pair of a Fetch request, as Kafka's ``FetchMetadata``.

A request with epoch ``INITIAL_EPOCH`` (0) or ``FINAL_EPOCH`` (-1) is a *full* fetch: it lists every partition
the fetcher wants. Any other epoch is *incremental*: it lists only what changed since the previous request of
the same session, whose epoch must be exactly the one before it.
"""

from __future__ import annotations

from typing import NamedTuple

INVALID_SESSION_ID = 0
"""The session id of a fetcher without a session, and the one a broker answers when it made none."""

INITIAL_EPOCH = 0
"""Request epoch meaning "close my session, if any, and create a new one if you can"."""

FINAL_EPOCH = -1
"""Request epoch meaning "close my session, if any, and do not create one" (also every request before v7)."""

_INT32_MAX = 0x7FFFFFFF


def next_epoch(prev_epoch: int) -> int:
    """The epoch after ``prev_epoch``: FINAL stays FINAL, and the sequence wraps from int32 max to 1 (never 0)."""
    if prev_epoch < 0:
        return FINAL_EPOCH
    if prev_epoch == _INT32_MAX:
        return 1
    return prev_epoch + 1


class FetchMetadata(NamedTuple):
    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH or self.epoch == FINAL_EPOCH

    def __str__(self) -> str:
        sid = "INVALID" if self.session_id == INVALID_SESSION_ID else str(self.session_id)
        epoch = {INITIAL_EPOCH: "INITIAL", FINAL_EPOCH: "FINAL"}.get(self.epoch, str(self.epoch))
        return f"(sessionId={sid}, epoch={epoch})"


LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)
"""What a request older than v7 (no session fields) means."""
