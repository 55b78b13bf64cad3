"""Metric reporters: expose the broker's :class:`~pykbroker.utils.metrics.MetricsRegistry` outside the process.

Kafka's ``metric.reporters`` classes (``org.apache.kafka.common.metrics.MetricsReporter``): the broker
instantiates each class named there, calls ``configure(broker config)`` then ``init(registry)`` at
start-up and ``close()`` at shutdown (:mod:`pykbroker.metrics.reporter`).
:class:`pykbroker.metrics.prometheus.PrometheusReporter` serves ``/metrics`` in Prometheus text format,
with the names the Prometheus JMX exporter gives Kafka's MBeans (:mod:`pykbroker.metrics.jmx_names`);
docs/METRICS.md lists them.

Layering: this package imports ``utils`` and ``config`` only; the server imports it.
"""
