"""LogLoader on real files (Kafka's LogLoaderTest): the clean-shutdown fast path, recovery of what follows the
recovery point after an unclean one, leftovers of interrupted operations, the leader-epoch checkpoint and the
log start offset checkpoint brought in line with the log, index rebuilds, and producer state rebuilt from the
log when its snapshot is gone. (tests/unit/log/test_log_recovery.py has the torn and corrupt tails.)"""

from __future__ import annotations

import os

from pykbroker.log.checkpoints import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCheckpointFile
from pykbroker.log.leader_epoch_cache import EpochEntry
from pykbroker.log.log_config import LogConfig
from pykbroker.log.unified_log import UnifiedLog
from pykbroker.utils.time import MockTime
from tests.unit.log.log_test_utils import assign_offsets, make_batch

SIZE = 161  # make_batch(..., 100): a 61-byte header and 100 bytes of records
CONFIG = {"segment.bytes": 5 * SIZE, "index.interval.bytes": 300}
PID = 7
NOW = 1_700_000_000_000


def open_log(path, clean=True, recovery_point=0, log_start_offset=0, **config) -> UnifiedLog:
    return UnifiedLog.create(
        str(path),
        LogConfig({**CONFIG, **config}),
        None,
        MockTime(current_ms=NOW),
        had_clean_shutdown=clean,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
    )


def produce(log: UnifiedLog, n: int, epoch: int = 0) -> None:
    """``n`` batches of two records (segments of five batches: 0, 10, 20...)."""
    for _ in range(n):
        log.append_as_leader(make_batch(0, 2, 100), epoch, assign_offsets(epoch))


def follow(log: UnifiedLog, epochs: list[int]) -> None:
    """One single-record batch per entry of ``epochs``, appended as a follower at the log end."""
    for epoch in epochs:
        log.append_as_follower(make_batch(log.log_end_offset, 1, 100, leader_epoch=epoch))


def corrupt(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"\x00\x01\x02")


def files(log: UnifiedLog) -> list[str]:
    return sorted(os.listdir(log.dir))


# -- clean and unclean shutdown -------------------------------------------------------------------------


def test_clean_shutdown_loads_without_validating_any_batch(tmp_path):
    """Kafka's testCleanShutdownFile: with the clean-shutdown marker nothing is recovered, even from recovery
    point 0, and the recovery point is the log end."""
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    first = log.segments.get(0).log.path
    log.close()
    corrupt(first, 2 * SIZE + 100)  # would be cut by a recovery
    again = open_log(tmp_path / "t-0", clean=True, recovery_point=0)
    assert again.recovery_report.recovered_segments == 0
    assert again.log_end_offset == 24 and again.recovery_point == 24


def test_unclean_shutdown_validates_every_segment_after_the_recovery_point(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    log.close()
    again = open_log(tmp_path / "t-0", clean=False, recovery_point=0)
    report = again.recovery_report
    assert report.recovered_segments == 3 and report.truncated_segment is None and report.deleted_segments == ()
    assert again.log_end_offset == 24
    assert again.recovery_point == 0  # advanced only by a flush (Kafka's recoverLog)


def test_unclean_shutdown_leaves_segments_below_the_recovery_point_alone(tmp_path):
    """Kafka's testRecoverOnlyLastSegment: the segments wholly below the recovery point were flushed; a bad
    byte there is not looked at."""
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    first = log.segments.get(0).log.path
    log.close()
    corrupt(first, 2 * SIZE + 100)
    again = open_log(tmp_path / "t-0", clean=False, recovery_point=22)
    assert again.recovery_report.recovered_segments == 1  # segment 20 only
    assert again.recovery_report.truncated_segment is None
    assert again.log_end_offset == 24 and again.recovery_point == 22


def test_recovery_point_beyond_the_log_end_is_brought_back_to_it(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 3)
    log.close()
    again = open_log(tmp_path / "t-0", clean=False, recovery_point=100)
    assert again.recovery_point == again.log_end_offset == 6


def test_torn_tail_of_the_active_segment_after_the_recovery_point_is_truncated(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    active = log.segments.active_segment.log.path
    log.close()
    with open(active, "ab") as f:
        f.write(make_batch(24, 2, 100)[:70])
    again = open_log(tmp_path / "t-0", clean=False, recovery_point=20)
    assert again.recovery_report.truncated_bytes == 70 and again.recovery_report.truncated_segment == 20
    assert again.log_end_offset == 24 and os.path.getsize(active) == 2 * SIZE


def test_reopen_after_an_unclean_shutdown_then_truncate(tmp_path):
    """Kafka's testReopenThenTruncate."""
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    log.close()
    again = open_log(tmp_path / "t-0", clean=False)
    again.truncate_to(4)
    assert again.segments.base_offsets() == (0,) and again.log_end_offset == 4


def test_empty_active_segment_without_index_files_is_loaded(tmp_path):
    """Kafka's testRecoverWithEmptyActiveSegment: a roll whose new (empty) segment never got its index files."""
    log = open_log(tmp_path / "t-0")
    produce(log, 5)
    log.roll()
    log.flush()
    active = log.segments.active_segment
    assert active.base_offset == 10
    log.close_handlers()
    for path in (active.offset_index_path, active.time_index_path):
        if os.path.exists(path):
            os.unlink(path)
    again = open_log(tmp_path / "t-0", clean=False, recovery_point=10)
    assert again.log_end_offset == 10 and again.segments.base_offsets() == (0, 10)
    again.segments.active_segment.sanity_check()
    produce(again, 1)
    assert again.log_end_offset == 12


# -- leftovers of interrupted operations ------------------------------------------------------------------


def test_deleted_cleaned_swap_and_tmp_leftovers_are_removed_and_segments_kept(tmp_path):
    """Kafka's testOpenDeletesObsoleteFiles and removeTempFilesAndCollectSwapFiles. pykbroker never swaps
    segments (its cleaner replaces a segment file in place), so a ``.swap`` file is a stray and goes too."""
    log = open_log(tmp_path / "t-0")
    produce(log, 7)  # segments 0 and 10
    log.close()
    d = tmp_path / "t-0"
    leftovers = [
        "00000000000000000000.log.deleted",
        "00000000000000000000.index.deleted",
        "00000000000000000000.timeindex.deleted",
        "00000000000000000010.log.cleaned",
        "00000000000000000010.log.swap",
        "00000000000000000010.index.swap",
        "leader-epoch-checkpoint.tmp",
    ]
    for name in leftovers:
        (d / name).write_bytes(b"junk")
    again = open_log(d)
    assert not set(leftovers) & set(files(again))
    assert again.segments.base_offsets() == (0, 10) and again.log_end_offset == 14


def test_orphaned_index_files_are_deleted(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 3)
    log.close()
    d = tmp_path / "t-0"
    for name in ("00000000000000000050.index", "00000000000000000050.timeindex"):
        (d / name).write_bytes(b"\x00" * 12)
    again = open_log(d, clean=False)
    assert not [n for n in files(again) if n.startswith("00000000000000000050")]
    assert again.segments.base_offsets() == (0,)


def test_a_directory_named_like_a_leftover_is_not_touched(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 1)
    log.close()
    (tmp_path / "t-0" / "x.deleted").mkdir()
    again = open_log(tmp_path / "t-0")
    assert (tmp_path / "t-0" / "x.deleted").is_dir() and again.log_end_offset == 2


# -- indexes -----------------------------------------------------------------------------------------------


def test_missing_time_index_of_a_closed_segment_is_rebuilt(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    segment = log.segments.get(10)
    offsets, times = segment.offset_index.entries_list(), segment.time_index.entries_list()
    log.close()
    os.unlink(tmp_path / "t-0" / "00000000000000000010.timeindex")
    again = open_log(tmp_path / "t-0")
    rebuilt = again.segments.get(10)
    assert rebuilt.offset_index.entries_list() == offsets and rebuilt.time_index.entries_list() == times


def test_corrupt_index_of_the_active_segment_is_rebuilt_on_unclean_load(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 14)
    entries = log.segments.active_segment.offset_index.entries_list()
    assert entries
    log.close()
    with open(tmp_path / "t-0" / "00000000000000000020.index", "r+b") as f:
        f.write(b"\x7f\x00\x00\x00\x00\x00\x00\x01")  # an entry after the one that follows it
    again = open_log(tmp_path / "t-0", clean=False, recovery_point=20)
    active = again.segments.active_segment
    active.offset_index.sanity_check()
    assert active.offset_index.entries_list() == entries
    assert again.log_end_offset == 28


# -- log start offset ---------------------------------------------------------------------------------------


def test_log_start_offset_from_the_checkpoint_is_honoured(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, 12)
    log.close()
    again = open_log(tmp_path / "t-0", log_start_offset=13)
    assert again.log_start_offset == 13 and again.segments.base_offsets() == (0, 10, 20)
    assert again.log_end_offset == 24


def test_log_start_offset_below_the_first_segment_is_the_first_segment_base(tmp_path):
    log = open_log(tmp_path / "t-0", **{"retention.ms": -1})
    produce(log, 12)
    log.update_high_watermark(24)
    log.maybe_increment_log_start_offset(12)
    log.delete_old_segments()
    assert log.segments.base_offsets()[0] == 10
    log.close()
    again = open_log(tmp_path / "t-0", log_start_offset=0, **{"retention.ms": -1})
    assert again.log_start_offset == 10


def test_log_end_below_the_checkpointed_start_deletes_every_segment(tmp_path):
    """Kafka's testLogEndLessThanStartAfterReopen: recovery cut the log below its checkpointed start offset;
    every segment goes and an empty one starts at the log start offset (with its index files)."""
    log = open_log(tmp_path / "t-0")
    follow(log, [1, 1, 2, 2, 2, 2, 2, 2])
    log.close()
    with open(tmp_path / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(b"corruptRecord")
    # the garbage is at the end of segment 0, ahead of segment 5: recovery truncates there and deletes
    # segment 5, leaving a log end (5) below the start offset (6)
    again = open_log(tmp_path / "t-0", clean=False, log_start_offset=6)
    assert again.recovery_report.deleted_segments == (5,)
    assert again.segments.base_offsets() == (6,)
    assert again.log_start_offset == again.log_end_offset == 6
    assert files(again).count("00000000000000000006.log") == 1
    assert "00000000000000000006.index" in files(again) and "00000000000000000006.timeindex" in files(again)
    assert not [n for n in files(again) if n.startswith("00000000000000000000.")]
    assert again.leader_epoch_cache.epoch_entries() == []


# -- leader epochs -----------------------------------------------------------------------------------------


def test_leader_epoch_checkpoint_is_truncated_to_the_log_end(tmp_path):
    log = open_log(tmp_path / "t-0")
    follow(log, [1, 1, 2, 2])
    log.close()
    checkpoint = LeaderEpochCheckpointFile(str(tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT_FILE))
    checkpoint.write([(1, 0), (2, 2), (3, 4), (4, 9)])  # epochs whose batches never reached this log
    again = open_log(tmp_path / "t-0")
    assert again.leader_epoch_cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 2)]
    assert checkpoint.read() == [(1, 0), (2, 2)]  # and written back


def test_leader_epochs_of_a_torn_tail_are_dropped(tmp_path):
    log = open_log(tmp_path / "t-0")
    follow(log, [1, 1, 2, 3])
    active = log.segments.active_segment.log.path
    log.close()
    with open(active, "r+b") as f:
        f.truncate(3 * SIZE + 30)  # epoch 3's batch half on disk
    again = open_log(tmp_path / "t-0", clean=False)
    assert again.log_end_offset == 3
    assert again.leader_epoch_cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 2)]
    assert again.end_offset_for_epoch(2) == (3, 2)


def test_leader_epochs_lost_from_the_checkpoint_are_recovered_from_the_batches(tmp_path):
    """Kafka's testLogRecoversForLeaderEpoch."""
    log = open_log(tmp_path / "t-0")
    follow(log, [1, 2, 2, 3])
    assert log.leader_epoch_cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 1), EpochEntry(3, 3)]
    log.leader_epoch_cache.truncate_from_end(2)
    log.close()
    again = open_log(tmp_path / "t-0", clean=False)
    assert again.leader_epoch_cache.epoch_entries() == [EpochEntry(1, 0), EpochEntry(2, 1), EpochEntry(3, 3)]


def test_leader_epoch_entries_below_the_log_start_offset_are_trimmed(tmp_path):
    log = open_log(tmp_path / "t-0")
    follow(log, [1, 1, 1, 2, 2, 3])
    log.close()
    again = open_log(tmp_path / "t-0", log_start_offset=4)
    assert again.leader_epoch_cache.epoch_entries() == [EpochEntry(2, 4), EpochEntry(3, 5)]


# -- producer state ----------------------------------------------------------------------------------------


def produce_idempotent(log: UnifiedLog, batches: int) -> None:
    """``batches`` batches of two records from producer PID (epoch 0), sequences 0, 2, 4..."""
    for i in range(batches):
        batch = make_batch(0, 2, 100, max_timestamp=NOW, producer_id=PID, producer_epoch=0, base_sequence=2 * i)
        log.append_as_leader(batch, 0, assign_offsets())


def snapshots(log: UnifiedLog) -> list[str]:
    return [n for n in files(log) if n.endswith(".snapshot")]


def test_producer_state_is_rebuilt_from_the_log_when_the_snapshot_is_missing(tmp_path):
    """Kafka's testProducerSnapshotsRecoveryAfterUncleanShutdown: without a snapshot, an unclean load replays
    the batches of every segment."""
    log = open_log(tmp_path / "t-0")
    produce_idempotent(log, 7)  # segments 0 and 10
    before = log.producer_state_manager.last_entry(PID)
    assert before is not None and (before.last_seq, before.last_data_offset) == (13, 13)
    log.close()
    for name in snapshots(log):
        os.unlink(tmp_path / "t-0" / name)
    again = open_log(tmp_path / "t-0", clean=False)
    entry = again.producer_state_manager.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 0
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (
        before.first_seq,
        before.last_seq,
        before.last_data_offset,
    )
    assert "00000000000000000014.snapshot" in snapshots(again)


def test_producer_state_comes_from_the_snapshot_after_a_clean_shutdown(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce_idempotent(log, 3)
    log.close()
    assert "00000000000000000006.snapshot" in snapshots(log)
    again = open_log(tmp_path / "t-0", clean=True)
    entry = again.producer_state_manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 5


def test_clean_shutdown_without_any_snapshot_skips_the_rebuild(tmp_path):
    """Kafka's testSkipTruncateAndReloadIfNewMessageFormatAndCleanShutdown: no snapshot after a clean shutdown
    means the log had no producers to rebuild (the upgrade case); an empty snapshot is written at the end."""
    log = open_log(tmp_path / "t-0")
    produce_idempotent(log, 3)
    log.close()
    for name in snapshots(log):
        os.unlink(tmp_path / "t-0" / name)
    again = open_log(tmp_path / "t-0", clean=True)
    assert again.producer_state_manager.last_entry(PID) is None
    assert snapshots(again) == ["00000000000000000006.snapshot"]


def test_a_new_log_creates_its_index_files_on_first_use(tmp_path):
    """Issue 31: a new log's first segment gets its index files (and mapping) on first use, not at creation; an
    unused log reopened after a clean shutdown still has none and loads without a rebuild; a used one keeps them."""

    def index_files(log):
        return [n for n in files(log) if n.endswith((".index", ".timeindex"))]

    log = open_log(tmp_path / "t-0")
    assert files(log) == ["00000000000000000000.log"] and index_files(log) == []
    assert not log.segments.active_segment._lazy_offset_index.is_loaded  # nothing mapped either
    log.close()
    again = open_log(tmp_path / "t-0")
    assert index_files(again) == [] and again.log_end_offset == 0
    again.segments.active_segment.sanity_check()
    again.close()
    again = open_log(tmp_path / "t-0", clean=False)  # recovery rebuilds (creates) the indexes of the empty segment
    assert again.log_end_offset == 0
    again.close()
    again = open_log(tmp_path / "t-0")
    produce(again, 1)
    assert index_files(again) == ["00000000000000000000.index", "00000000000000000000.timeindex"]
    again.close()
    reopened = open_log(tmp_path / "t-0")
    assert len(index_files(reopened)) == 2 and reopened.log_end_offset == 2
    assert reopened.recovery_report.recovered_segments == 0
    produce(reopened, 1)
    assert reopened.log_end_offset == 4


def test_a_new_empty_log_writes_no_producer_snapshot(tmp_path):
    """Kafka's takeSnapshot writes only past the last snapshot offset (0 for a fresh ProducerStateManager): a
    new log's directory holds no 0.snapshot; reloading it (clean or not) and producing work as before."""
    log = open_log(tmp_path / "t-0")
    assert snapshots(log) == []
    log.close()
    assert snapshots(log) == []
    for clean in (True, False):
        again = open_log(tmp_path / "t-0", clean=clean)
        assert again.log_end_offset == 0 and snapshots(again) == []
        again.close()
    again = open_log(tmp_path / "t-0")
    produce_idempotent(again, 1)
    again.close()
    assert snapshots(again) == ["00000000000000000002.snapshot"]
    entry = open_log(tmp_path / "t-0").producer_state_manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 1


def test_producer_snapshot_beyond_the_recovered_log_end_is_deleted(tmp_path):
    """A snapshot taken past the end that recovery kept describes records that are gone: it is deleted and
    the state is replayed from the log up to the new end."""
    log = open_log(tmp_path / "t-0")
    produce_idempotent(log, 4)
    active = log.segments.active_segment.log.path
    log.close()
    assert "00000000000000000008.snapshot" in snapshots(log)
    with open(active, "r+b") as f:
        f.truncate(3 * SIZE + 40)  # the fourth batch torn
    again = open_log(tmp_path / "t-0", clean=False)
    assert again.log_end_offset == 6
    assert "00000000000000000008.snapshot" not in snapshots(again)
    entry = again.producer_state_manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 5 and entry.last_data_offset == 5


def test_expired_producers_in_the_snapshot_are_not_loaded(tmp_path):
    """Kafka's loadFromSnapshot skips producers idle for producer.id.expiration.ms (default one day)."""
    log = open_log(tmp_path / "t-0")
    produce_idempotent(log, 1)
    log.close()
    again = UnifiedLog.create(str(tmp_path / "t-0"), LogConfig(CONFIG), None, MockTime(current_ms=NOW + 86_400_000))
    assert again.producer_state_manager.last_entry(PID) is None


def test_stray_producer_snapshots_are_removed_but_the_largest_beyond_the_last_segment_kept(tmp_path):
    """Kafka's testLoadingLogKeepsLargestStrayProducerStateSnapshot (``removeStraySnapshots``): a snapshot at an
    offset that is no segment's base is deleted at load, except the largest one past the last segment's base
    (the clean shutdown's snapshot at the log end). Without it every restart's log-end snapshot stayed."""
    log = open_log(tmp_path / "t-0")
    produce_idempotent(log, 12)  # segments 0, 10 and 20; snapshots at the rolls (10, 20) and the close (24)
    log.close()
    (tmp_path / "t-0" / "00000000000000000015.snapshot").write_bytes(b"")
    (tmp_path / "t-0" / "00000000000000000022.snapshot").write_bytes(b"")
    again = open_log(tmp_path / "t-0", clean=False)
    assert snapshots(again) == [
        "00000000000000000010.snapshot",
        "00000000000000000020.snapshot",
        "00000000000000000024.snapshot",
    ]
    assert again.producer_state_manager.snapshot_offsets() == [10, 20, 24]
    assert again.producer_state_manager.last_entry(PID).last_seq == 23
