"""BrokerLifecycleManager and a failed log dir (KIP-858, Kafka's ``propagateDirectoryFailure``): the dir's id goes
in the heartbeats from then on, the next heartbeat goes at once (after the one in flight, never two at a time), and
a registration sent again leaves the dir out. Driven over a fake channel whose timers run when the test says."""

from __future__ import annotations

import uuid
from concurrent.futures import Future

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.broker_lifecycle_manager import BrokerLifecycleManager

D1, D2 = uuid.UUID(int=(1 << 64) + 7), uuid.UUID(int=(2 << 64) + 7)


class FakeChannel:
    """``send_request`` records ``(api_key, body, future)``; ``send_thread.schedule`` records ``(delay, fn)``."""

    def __init__(self):
        self.send_thread = self
        self.requests: list[tuple[int, dict, Future]] = []
        self.timers: list[tuple[int, object]] = []

    def send_request(self, api_key, version, body, timeout_ms, unwrap=None) -> Future:
        future: Future = Future()
        self.requests.append((api_key, body, future))
        return future

    def schedule(self, delay_ms, fn) -> None:
        self.timers.append((delay_ms, fn))

    def run_due(self) -> None:
        """Run the timers due now (delay 0), as the send thread would."""
        due = [fn for delay, fn in self.timers if delay == 0]
        self.timers = [(d, fn) for d, fn in self.timers if d != 0]
        for fn in due:
            fn()

    def pending(self, api_key: int) -> list[tuple[dict, Future]]:
        return [(body, f) for k, body, f in self.requests if k == api_key and not f.done()]


def heartbeat_ok() -> dict:
    return {"error_code": errors.NONE, "is_caught_up": True, "is_fenced": False, "should_shut_down": False}


def test_a_failed_dir_goes_in_the_next_heartbeat_at_once_and_stays_out_of_a_new_registration():
    channel = FakeChannel()
    manager = BrokerLifecycleManager(101, channel, 5000, lambda: 42)
    manager.start({"broker_id": 101, "log_dirs": [D1, D2]})
    [(registration, future)] = channel.pending(ApiKeys.BROKER_REGISTRATION)
    assert registration["log_dirs"] == [D1, D2]
    future.set_result({"error_code": errors.NONE, "broker_epoch": 7})
    [(first, in_flight)] = channel.pending(ApiKeys.BROKER_HEARTBEAT)
    assert first["offline_log_dirs"] == []

    manager.propagate_directory_failure(D1)
    channel.run_due()
    assert len(channel.pending(ApiKeys.BROKER_HEARTBEAT)) == 1  # never two heartbeats in flight
    in_flight.set_result(heartbeat_ok())
    assert channel.timers[-1][0] == 0  # the next one is due now, not in 5 s
    channel.run_due()
    [(second, in_flight)] = channel.pending(ApiKeys.BROKER_HEARTBEAT)
    assert second["offline_log_dirs"] == [D1]

    in_flight.set_result(heartbeat_ok())
    channel.timers = [(d, fn) for d, fn in channel.timers if d != 30000]  # log.dir.failure.timeout.ms's check
    assert [d for d, _ in channel.timers] == [5000]  # back to the interval, one chain of heartbeats
    for _, fn in channel.timers:
        fn()
    [(third, in_flight)] = channel.pending(ApiKeys.BROKER_HEARTBEAT)
    assert third["offline_log_dirs"] == [D1]

    in_flight.set_result({**heartbeat_ok(), "error_code": errors.STALE_BROKER_EPOCH})
    channel.run_due()
    [(again, _)] = channel.pending(ApiKeys.BROKER_REGISTRATION)
    assert again["log_dirs"] == [D2]


def test_a_failure_reported_with_no_heartbeat_in_flight_sends_one_now_and_drops_the_scheduled_one():
    channel = FakeChannel()
    manager = BrokerLifecycleManager(101, channel, 5000, lambda: 42)
    manager.start({"broker_id": 101, "log_dirs": [D1, D2]})
    channel.pending(ApiKeys.BROKER_REGISTRATION)[0][1].set_result({"error_code": errors.NONE, "broker_epoch": 7})
    channel.pending(ApiKeys.BROKER_HEARTBEAT)[0][1].set_result(heartbeat_ok())
    [(delay, scheduled)] = channel.timers
    assert delay == 5000
    channel.timers.clear()
    manager.propagate_directory_failure(D2)
    channel.run_due()
    [(body, _)] = channel.pending(ApiKeys.BROKER_HEARTBEAT)
    assert body["offline_log_dirs"] == [D2]
    scheduled()  # the heartbeat scheduled before: dropped
    assert len(channel.pending(ApiKeys.BROKER_HEARTBEAT)) == 1


def run_timer(channel: FakeChannel, delay_ms: int) -> None:
    due = [fn for d, fn in channel.timers if d == delay_ms]
    channel.timers = [(d, fn) for d, fn in channel.timers if d != delay_ms]
    for fn in due:
        fn()


def registered(fatal: list[str]) -> tuple[FakeChannel, BrokerLifecycleManager]:
    channel = FakeChannel()
    manager = BrokerLifecycleManager(101, channel, 5000, lambda: 42, failure_timeout_ms=3000, on_fatal=fatal.append)
    manager.start({"broker_id": 101, "log_dirs": [D1, D2]})
    channel.pending(ApiKeys.BROKER_REGISTRATION)[0][1].set_result({"error_code": errors.NONE, "broker_epoch": 7})
    return channel, manager


def test_a_failed_dir_no_controller_heard_of_in_log_dir_failure_timeout_ms_is_fatal():
    fatal: list[str] = []
    channel, manager = registered(fatal)
    manager.propagate_directory_failure(D1)
    channel.pending(ApiKeys.BROKER_HEARTBEAT)[0][1].set_exception(TimeoutError("no controller"))
    channel.run_due()
    channel.pending(ApiKeys.BROKER_HEARTBEAT)[0][1].set_exception(TimeoutError("no controller"))
    run_timer(channel, 3000)
    assert fatal == [f"Shutting down because couldn't communicate offline log dir {D1} with controllers"]


def test_a_failed_dir_the_controller_heard_of_is_not_fatal():
    fatal: list[str] = []
    channel, manager = registered(fatal)
    manager.propagate_directory_failure(D1)
    channel.pending(ApiKeys.BROKER_HEARTBEAT)[0][1].set_result(heartbeat_ok())  # sent before the failure
    channel.run_due()
    channel.pending(ApiKeys.BROKER_HEARTBEAT)[0][1].set_result(heartbeat_ok())  # carried D1
    run_timer(channel, 3000)
    assert fatal == []
