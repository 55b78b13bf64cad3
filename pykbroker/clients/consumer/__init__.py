"""pykbroker's consumer client (see :mod:`.kafka_consumer`)."""

from pykbroker.clients.consumer.kafka_consumer import ConsumerRecord, KafkaConsumer

__all__ = ["ConsumerRecord", "KafkaConsumer"]
