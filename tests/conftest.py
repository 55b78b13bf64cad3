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
    for b in started:
        try:
            b.stop()
        except Exception:
            b.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()
