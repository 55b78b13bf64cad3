"""Kafka's log files (server.log, controller.log, state-change.log) rotated by size, appended to, per-logger
levels, and the standard library as the output of an embedded broker (pykbroker.utils.logging)."""

from __future__ import annotations

import io
import logging

import pytest

from pykbroker.utils import logging as plog


@pytest.fixture
def reconfigure():
    saved = plog.saved_config()
    yield plog.configure
    plog.restore(saved)


def _logger(component: str, module: str) -> plog.ComponentLogger:
    return plog.ComponentLogger(component, module, component)


def test_files_by_component_and_the_console_unchanged(tmp_path, reconfigure):
    console = io.StringIO()
    reconfigure("info", stream=console, log_dir=str(tmp_path))
    _logger("LogManager", "pykbroker.log.log_manager").info("Loaded logs")
    _logger("QuorumController id=1", "pykbroker.metadata.quorum_controller").info("Becoming the active controller")
    plog.state_change_logger(1).info("Leader t-0 starts at leader epoch 0")
    plog.get_logger("SocketServer", nodeId=1).info("Awaiting socket connections")  # name: this module
    server = (tmp_path / "server.log").read_text()
    controller = (tmp_path / "controller.log").read_text()
    state = (tmp_path / "state-change.log").read_text()
    assert "INFO [LogManager] Loaded logs" in server and "[SocketServer nodeId=1] Awaiting" in server
    assert "controller" not in server and "Leader t-0" not in server
    assert controller.count("\n") == 1 and "INFO [QuorumController id=1] Becoming the active controller" in controller
    assert state.count("\n") == 1 and "INFO [Broker id=1] Leader t-0 starts at leader epoch 0" in state
    assert len(console.getvalue().splitlines()) == 4  # the console gets every line, as before


def test_size_rotation_keeps_backup_count_files(tmp_path, reconfigure):
    reconfigure("info", console=False, log_dir=str(tmp_path), max_bytes=2000, backup_count=2)
    log = _logger("UnifiedLog", "pykbroker.log.unified_log")
    for i in range(200):
        log.info(f"line {i:04d} " + "x" * 40)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("server.log"))
    assert names == ["server.log", "server.log.1", "server.log.2"]
    assert all((tmp_path / n).stat().st_size <= 2000 for n in names)
    assert "line 0199" in (tmp_path / "server.log").read_text()
    assert "line 0000" not in "".join((tmp_path / n).read_text() for n in names)  # rotated away


def test_a_new_configuration_appends(tmp_path, reconfigure):
    reconfigure("info", console=False, log_dir=str(tmp_path))
    _logger("KafkaServer", "pykbroker.kafka").info("first run")
    reconfigure("info", console=False, log_dir=str(tmp_path))
    _logger("KafkaServer", "pykbroker.kafka").info("second run")
    text = (tmp_path / "server.log").read_text()
    assert text.index("first run") < text.index("second run")


def test_levels_per_component_and_per_package(tmp_path, reconfigure):
    console = io.StringIO()
    reconfigure("warn,SocketServer=debug,pykbroker.log=info,pykbroker.log.log_cleaner=error", stream=console)
    _logger("SocketServer listenerType=BROKER", "pykbroker.network.socket_server").debug("socket debug")
    _logger("Processor", "pykbroker.network.socket_server").info("processor info")  # root: warn
    _logger("UnifiedLog", "pykbroker.log.unified_log").info("log info")
    _logger("UnifiedLog", "pykbroker.log.unified_log").debug("log debug")
    _logger("LogCleaner", "pykbroker.log.log_cleaner").warning("cleaner warn")  # longest key: error
    _logger("KafkaApi", "pykbroker.server.kafka_apis").warning("apis warn")
    out = console.getvalue()
    assert "DEBUG [SocketServer listenerType=BROKER] socket debug" in out
    assert "log info" in out and "apis warn" in out
    assert "processor info" not in out and "log debug" not in out and "cleaner warn" not in out


def test_bad_level_is_reported_and_ignored(capsys):
    assert plog.parse_levels("debug,SocketServer=loud,state.change.logger=warn") == (
        logging.DEBUG,
        {"state.change.logger": logging.WARNING},
    )
    assert "ignoring log level 'SocketServer=loud'" in capsys.readouterr().err


def test_stdlib_output_follows_the_host_programs_levels(reconfigure, caplog):
    caplog.set_level(logging.INFO, logger="pykbroker")
    reconfigure(stdlib=True)
    _logger("SocketServer nodeId=1", "pykbroker.network.socket_server").info("Awaiting socket connections")
    _logger("SocketServer nodeId=1", "pykbroker.network.socket_server").debug("not enabled")
    plog.state_change_logger(1).warning("state change")
    records = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("pykbroker")]
    assert records == [
        ("pykbroker.network.socket_server", logging.INFO, "[SocketServer nodeId=1] Awaiting socket connections"),
        ("pykbroker.state.change.logger", logging.WARNING, "[Broker id=1] state change"),
    ]
