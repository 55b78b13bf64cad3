"""Partition logs on disk, as Kafka's ``storage`` module and ``kafka.log``.

``LogManager`` (all logs, checkpoints, background tasks) -> ``UnifiedLog`` (one partition) ->
``LogSegments`` -> ``LogSegment`` (``FileRecords`` + ``OffsetIndex`` + ``TimeIndex``). Start-up and
crash recovery: ``LogLoader``. Idempotence: ``ProducerStateManager``. Leader epochs:
``LeaderEpochFileCache``. Topic-level configuration: ``LogConfig``. Validation of produced records
(``log_validator``) is a separate, sans-I/O module the log calls through a callable.
"""
