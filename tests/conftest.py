import os

# Strict codec: encoding a dict with a key that is no field of the message raises (pykbroker.protocol.codec).
# Set before pykbroker is imported; brokers started by the tests inherit it.
os.environ.setdefault("PYKBROKER_STRICT_CODEC", "1")

import pytest

from tests.helpers.broker import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path):
    """Start real brokers (subprocesses); every one started is stopped at teardown."""
    started: list[BrokerProcess] = []

    def make(name: str = "broker", start: bool = True, **overrides) -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, **overrides)
        started.append(b)
        return b.start() if start else b

    yield make
    _stop_and_check(started)


@pytest.fixture(scope="module")
def module_broker(request, tmp_path_factory) -> BrokerProcess:
    """One real broker (subprocess) shared by a test module; stopped and checked as ``broker_factory``'s."""
    b = BrokerProcess(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "broker").start()
    yield b
    _stop_and_check([b])


def _stop_and_check(started: list[BrokerProcess]) -> None:
    for b in started:
        try:
            b.stop()
        except Exception:  # noqa: BLE001 - a broker that does not stop is killed
            b.kill()
    # A strict-codec violation inside a broker becomes an error response and a log line, which a test may not
    # notice: fail on it here (a response dict with a key that is no field of the message is a bug).
    violations = [line for b in started for line in b.lines if "unknown field(s)" in line]
    if violations:
        pytest.fail("strict codec: response fields unknown to the schema:\n" + "\n".join(violations[:10]))


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()
