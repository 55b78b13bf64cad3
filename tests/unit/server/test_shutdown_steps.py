"""ShutdownSteps, the shutdown step list that BrokerServer, ControllerServer and SharedServer build: the
order of adding, no step for a part never started (None), ``shutdown()`` by default or the given stop, a
failing step reported and the later ones still run (Kafka's ``CoreUtils.swallow`` per component)."""

from __future__ import annotations

from pykbroker.server.server_common import ShutdownSteps


class Part:
    def __init__(self, name: str, calls: list[str], fail: Exception | None = None):
        self.name, self.calls, self.fail = name, calls, fail

    def shutdown(self) -> None:
        self.calls.append(f"{self.name}.shutdown")
        if self.fail is not None:
            raise self.fail

    def close(self, how: str = "") -> None:
        self.calls.append(f"{self.name}.close{how}")


def test_steps_run_in_order_skipping_parts_never_started():
    calls: list[str] = []
    steps = ShutdownSteps()
    steps.add("a", Part("a", calls))
    steps.add("never started", None)
    steps.add("b", Part("b", calls), lambda b: b.close("(drain)"))
    steps.add("also never started", None, lambda p: p.close())
    steps.add("c", Part("c", calls))
    assert [what for what, _ in steps.steps] == ["a", "b", "c"]
    errors: list[tuple[str, Exception]] = []
    steps.run(lambda what, e: errors.append((what, e)))
    assert calls == ["a.shutdown", "b.close(drain)", "c.shutdown"] and errors == []


def test_a_failing_step_is_reported_and_the_next_ones_still_run():
    calls: list[str] = []
    boom = AttributeError("'Part' object has no attribute 'gone'")  # a real error, not "never started"
    steps = ShutdownSteps()
    steps.add("first", Part("first", calls, fail=boom))
    steps.add("second", Part("second", calls, fail=RuntimeError("x")))
    steps.add("third", Part("third", calls))
    errors: list[tuple[str, Exception]] = []
    steps.run(lambda what, e: errors.append((what, e)))
    assert calls == ["first.shutdown", "second.shutdown", "third.shutdown"]
    assert [w for w, _ in errors] == ["first", "second"] and errors[0][1] is boom


def test_the_stop_reads_its_arguments_when_it_runs():
    """A stop such as ``log_manager.shutdown(self.broker_epoch)`` sees the value at shutdown time."""
    calls: list[str] = []
    epoch = ["-1"]
    steps = ShutdownSteps()
    steps.add("log manager", Part("logs", calls), lambda p: p.close(epoch[0]))
    epoch[0] = "7"
    steps.run(lambda what, e: None)
    assert calls == ["logs.close7"]
