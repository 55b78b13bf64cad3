"""Open file descriptors: one per segment (the .log file); indexes are mapped on first use and their
mappings hold no descriptor, so many partitions fit the process's RLIMIT_NOFILE."""

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from pykbroker.utils.time import MockTime
from tests.unit.log.test_log_manager import manager, produce

ROOT_DIR = str(Path(__file__).resolve().parents[3])

N = 150


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_about_one_descriptor_per_partition(tmp_path):
    time = MockTime(current_ms=50_000_000)
    lm = manager([tmp_path], time, **{"log.segment.bytes": str(1 << 20)})
    lm.startup()
    before = open_fds()
    for i in range(N):
        log = lm.get_or_create_log("t", i, uuid.uuid4())
        produce(log, 4)  # past log.index.interval.bytes: both indexes get entries (they are mapped)
        assert log.active_segment.offset_index.entries > 0
    grown = open_fds() - before
    assert grown <= N + 5, f"{grown} descriptors for {N} partitions"
    lm.shutdown()
    assert open_fds() <= before


_RECOVER = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {root!r})
    resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from pykbroker.utils.time import MockTime
    from tests.unit.log.test_log_manager import manager
    lm = manager([{dir!r}], MockTime(current_ms=50_000_000), **{{"log.segment.bytes": str(1 << 20)}})
    lm.startup()
    assert not lm.had_clean_shutdown[lm.log_dirs[0]]
    ends = sorted(log.log_end_offset for log in lm.all_logs())
    print("RECOVERED", len(ends), ends[0], ends[-1])
""")


def _recover(tmp_path, limit):
    script = _RECOVER.format(root=ROOT_DIR, limit=limit, dir=str(tmp_path))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_recovery_with_a_low_open_file_limit(tmp_path):
    time = MockTime(current_ms=50_000_000)
    lm = manager([tmp_path], time, **{"log.segment.bytes": str(1 << 20)})
    lm.startup()
    for i in range(N):
        produce(lm.get_or_create_log("t", i, uuid.uuid4()), 4)
    for log in lm.all_logs():
        log.flush()  # no clean shutdown: the next start recovers every partition
    r = _recover(tmp_path, N + 60)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"RECOVERED {N} 8 8" in r.stdout
    r = _recover(tmp_path, N // 2)  # really too low: the error names the limit
    assert r.returncode != 0
    assert f"RLIMIT_NOFILE soft limit {N // 2}" in r.stderr, r.stderr[-2000:]
