"""vulture_whitelist.py (bin/run-lint's dead-code check) names real definitions: running it fails with an
AttributeError or ImportError once one of them is renamed or removed, so the whitelist cannot keep a stale name."""

from __future__ import annotations

import pathlib
import runpy

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_whitelisted_definition_exists():
    names = runpy.run_path(str(ROOT / "vulture_whitelist.py"))
    assert "KafkaConsumer" in names


def test_the_dead_code_check_is_part_of_the_lint():
    assert "vulture" in (ROOT / "bin" / "run-lint").read_text()
    assert "[tool.vulture]" in (ROOT / "pyproject.toml").read_text()
