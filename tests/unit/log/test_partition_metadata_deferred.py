"""``partition.metadata`` of a new log is written by a scheduled task (Kafka's ``flush-metadata-file``), not by the
thread creating the log (issue 31: log creation cost); the topic id is known at once, the file is written by the
task, by a flush or by close, and never into a deleted log's directory."""

from __future__ import annotations

import os
import uuid

import pytest

from pykbroker.log.log_config import LogConfig
from pykbroker.log.log_dir_failure_channel import LogDirFailureChannel
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.utils.scheduler import MockScheduler
from pykbroker.utils.time import MockTime

TOPIC_ID = uuid.UUID(int=77)


@pytest.fixture
def scheduler():
    return MockScheduler(MockTime(current_ms=1_000_000))


def create(tmp_path, scheduler, topic_id=TOPIC_ID) -> UnifiedLog:
    log = UnifiedLog.create(str(tmp_path / "t-0"), LogConfig(), scheduler, scheduler._time, topic_id=topic_id)
    log.log_dir_failure_channel = LogDirFailureChannel()
    return log


def metadata_file(log: UnifiedLog) -> str:
    return os.path.join(log.dir, "partition.metadata")


def test_written_by_the_scheduled_task_not_at_creation(tmp_path, scheduler):
    log = create(tmp_path, scheduler)
    assert log.topic_id == TOPIC_ID
    assert not os.path.exists(metadata_file(log))
    assert [t.name for t in scheduler.pending()] == ["flush-metadata-file"]
    scheduler.tick()
    with open(metadata_file(log)) as f:
        assert f.read().startswith("version: 0\ntopic_id: ")
    log.close()
    assert create(tmp_path, scheduler, topic_id=None).topic_id == TOPIC_ID


@pytest.mark.parametrize("how", ["close", "flush"])
def test_close_or_flush_writes_it_first(tmp_path, scheduler, how):
    log = create(tmp_path, scheduler)
    getattr(log, how)()
    assert os.path.exists(metadata_file(log))
    scheduler.tick()  # the task finds nothing left to write
    log.close()
    assert create(tmp_path, MockScheduler(scheduler._time), topic_id=None).topic_id == TOPIC_ID


def test_deleted_before_the_task_writes_nothing_and_takes_no_dir_offline(tmp_path, scheduler):
    log = create(tmp_path, scheduler)
    log.delete()
    scheduler.tick()
    assert not os.path.exists(log.dir)
    assert not log.log_dir_failure_channel.has_offline_log_dir(str(tmp_path))


def test_renamed_before_the_task_writes_into_the_new_directory(tmp_path, scheduler):
    log = create(tmp_path, scheduler)
    log.rename_dir("t-0.abc-future")
    scheduler.tick()
    assert os.path.exists(os.path.join(str(tmp_path), "t-0.abc-future", "partition.metadata"))
    log.close()
