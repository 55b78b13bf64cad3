"""The broker's configuration keys, one ConfigDef per area as Kafka's ``*Configs`` classes; merged into
:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`."""
