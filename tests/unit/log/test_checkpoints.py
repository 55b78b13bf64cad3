"""Checkpoint files and the leader epoch cache."""

import uuid

import pytest

from pykbroker.log.checkpoints import (
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    topic_id_from_string,
    topic_id_to_string,
)
from pykbroker.log.leader_epoch_cache import LeaderEpochFileCache


def test_offset_checkpoint_round_trip(tmp_path):
    f = OffsetCheckpointFile(str(tmp_path / "cp"))
    assert f.read() == {}
    f.write({("b", 1): 5, ("a", 0): 10})
    assert (tmp_path / "cp").read_text() == "0\n2\na 0 10\nb 1 5\n"
    assert f.read() == {("a", 0): 10, ("b", 1): 5}


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", ""])
def test_malformed_checkpoint(tmp_path, text):
    (tmp_path / "cp").write_text(text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(str(tmp_path / "cp")).read()


def test_topic_id_text_form():
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    text = topic_id_to_string(tid)
    assert len(text) == 22 and "=" not in text and topic_id_from_string(text) == tid


def test_partition_metadata(tmp_path):
    f = PartitionMetadataFile(str(tmp_path))
    tid = uuid.uuid4()
    f.write(tid)
    assert f.read() == tid
    (tmp_path / "partition.metadata").write_text("version: 1\n")
    with pytest.raises(CorruptCheckpointError):
        f.read()


def test_epoch_cache_assign_and_lookup(tmp_path):
    cp = LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint"))
    cache = LeaderEpochFileCache(("t", 0), cp)
    assert cache.end_offset_for_epoch(0, 10) == (-1, -1)
    cache.assign(2, 10)
    cache.assign(2, 15)  # same epoch, later offset: ignored
    cache.assign(4, 20)
    cache.assign(6, 30)
    assert cache.epoch_entries() == [(2, 10), (4, 20), (6, 30)]
    assert cache.end_offset_for_epoch(6, 99) == (6, 99)
    assert cache.end_offset_for_epoch(5, 99) == (4, 30)
    assert cache.end_offset_for_epoch(1, 99) == (1, 10)
    assert cache.end_offset_for_epoch(7, 99) == (-1, -1)
    assert cache.epoch_for_offset(25) == 4 and cache.epoch_for_offset(5) is None
    assert LeaderEpochFileCache(("t", 0), cp).epoch_entries() == [(2, 10), (4, 20), (6, 30)]


def test_epoch_cache_truncation(tmp_path):
    cache = LeaderEpochFileCache(("t", 0), LeaderEpochCheckpointFile(str(tmp_path / "c")))
    for e, o in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(e, o)
    cache.truncate_from_start(15)
    assert cache.epoch_entries() == [(2, 15), (3, 20)]
    cache.truncate_from_end(20)
    assert cache.epoch_entries() == [(2, 15)]
    cache.assign(5, 12)  # a new epoch starting below the last start offset replaces conflicting entries
    assert cache.epoch_entries() == [(5, 12)]
