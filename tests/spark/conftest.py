"""Spark test fixtures: one SparkSession per run (local[2,2], 127.0.0.1, UI off) and one pykbroker."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e spark/)")
pytest.importorskip("pyspark_pykbroker", reason="the spark/ package is not installed (pip install -e spark/)")


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[2,2]")
        .appName("pykbroker-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    import pyspark_pykbroker

    pyspark_pykbroker.register(s)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def spark_broker():
    from tests.helpers.broker import BrokerProcess

    b = BrokerProcess(Path(tempfile.mkdtemp(prefix="spark-broker-")), **{"log.retention.check.interval.ms": "500"})
    b.start()
    yield b
    b.stop()
