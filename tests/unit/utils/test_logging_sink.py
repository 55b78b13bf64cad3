"""A failing log stream never makes a log call raise (pykbroker.utils.logging's sink)."""

from __future__ import annotations

import io

from pykbroker.utils import logging as plog


class _BrokenPipe(io.StringIO):
    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")


def test_log_call_survives_broken_stream_and_falls_back_to_stderr(capsys):
    saved = plog.saved_config()
    try:
        plog.configure("info", stream=_BrokenPipe())
        log = plog.get_logger("Test")
        log.info("first line")  # must not raise
        log.warning("second line")
    finally:
        plog.restore(saved)
    err = capsys.readouterr().err
    assert "log output failed" in err
    assert "first line" in err and "second line" in err
