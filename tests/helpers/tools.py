"""Running the bin/ tools in tests as bin/ does (``python -m pykbroker.tools.<module>``)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers.broker import ROOT


def run_tool(
    module: str, *args: str, stdin: str | bytes | None = None, text: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run ``pykbroker.tools.<module>`` with ``args`` in a subprocess (its own logging set-up applies);
    ``text=False`` gives bytes stdout/stderr (and takes bytes ``stdin``)."""
    return subprocess.run(
        [sys.executable, "-m", f"pykbroker.tools.{module}", *args],
        input=stdin,
        capture_output=True,
        text=text,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def create_topic_with_tool(bootstrap: str, topic: str, partitions: int = 1, *config: str) -> None:
    """``kafka-topics --create`` (``config``: ``key=value`` strings); asserts it succeeded."""
    extra = [a for c in config for a in ("--config", c)]
    run = run_tool(
        "topic_command", "--bootstrap-server", bootstrap, "--create", "--topic", topic,
        "--partitions", str(partitions), *extra,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
