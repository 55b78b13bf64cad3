"""A stand-in for a parsed Request, carrying only what ``RequestChannel.update_request_metrics`` reads."""

from __future__ import annotations

from types import SimpleNamespace


def stub_request(
    api: str = "Produce",
    version: int = 9,
    body=None,
    *,
    start_ns: int = 0,
    dequeue_ns: int = 1_000_000,
    local_complete_ns: int = 2_000_000,
    response_complete_ns: int = 3_000_000,
    response_dequeue_ns: int = 4_000_000,
    throttle_time_ms: int = 0,
) -> SimpleNamespace:
    """API name and header version, body (a Fetch's tells follower from consumer), the phase timestamps (ns, -1 for a
    phase never reached) and the throttle time answered (ms)."""
    return SimpleNamespace(
        api_name=api,
        context=SimpleNamespace(header=SimpleNamespace(api_version=version)),
        body=body,
        start_time_ns=start_ns,
        request_dequeue_time_ns=dequeue_ns,
        api_local_complete_time_ns=local_complete_ns,
        response_complete_time_ns=response_complete_ns,
        response_dequeue_time_ns=response_dequeue_ns,
        api_throttle_time_ms=throttle_time_ms,
    )
