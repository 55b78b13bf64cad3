"""``pykbroker``: a PySpark Python data source and sink mirroring Spark's Kafka connector.

Spark registers it by itself (a top-level ``pyspark_*`` module exposing ``DefaultSource``), so
``spark.read.format("pykbroker")`` works as soon as this package is installed; :func:`register`
does it explicitly. Options, defaults, schema and offset JSON are those of ``format("kafka")``.
This module stays light: the source's heavy imports happen when Spark uses it.
"""

from pyspark_pykbroker.source import PyKBrokerDataSource

DefaultSource = PyKBrokerDataSource


def register(spark) -> None:
    """Register the ``pykbroker`` format on ``spark`` (a SparkSession)."""
    spark.dataSource.register(PyKBrokerDataSource)


__all__ = ["DefaultSource", "PyKBrokerDataSource", "register"]
