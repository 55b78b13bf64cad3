"""pykbroker's producer client, mirroring the Java producer (see :mod:`.kafka_producer`)."""

from pykbroker.clients.producer.kafka_producer import KafkaProducer
from pykbroker.clients.producer.producer_batch import FutureRecordMetadata, RecordMetadata

__all__ = ["FutureRecordMetadata", "KafkaProducer", "RecordMetadata"]
