import os
import sys
import tempfile

# Strict codec: encoding a dict with a key that is no field of the message raises (pykbroker.protocol.codec).
# Set before pykbroker is imported; brokers started by the tests inherit it.
os.environ.setdefault("PYKBROKER_STRICT_CODEC", "1")

# Bytecode cache outside the source tree when the environment forbids writing __pycache__
# (PYTHONDONTWRITEBYTECODE): without one, every broker and tool subprocess the tests start compiles
# pykbroker's ~350 modules again (~0.4 s a start), and pytest re-rewrites every test module's asserts.
# The cache goes under the temp dir (PYTHONPYCACHEPREFIX mirrors absolute paths, so checkouts do not
# collide); this process and its subprocesses use it. PYKBROKER_TEST_PYCACHE=0 turns this off.
if sys.dont_write_bytecode and os.environ.get("PYKBROKER_TEST_PYCACHE", "1") != "0":
    _prefix = os.environ.get("PYTHONPYCACHEPREFIX") or os.path.join(
        tempfile.gettempdir(), f"pykbroker-pycache-{os.getuid()}"
    )
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = _prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False

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
    # SIGTERM to every broker first, then wait for each: they shut down side by side, not one after the other.
    for b in started:
        b.begin_stop()
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
