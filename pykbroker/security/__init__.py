"""Security: SASL mechanisms and the server-side authenticator (Kafka's ``org.apache.kafka.common.security``)."""
