"""Static message types generated from the schema DSL (see :mod:`pykbroker.protocol.generator`).

Import the types from their family module, for example
``from pykbroker.protocol.messages.produce import ProduceRequest``. Modules:

- :mod:`pykbroker.protocol.messages.cluster`
- :mod:`pykbroker.protocol.messages.produce`
- :mod:`pykbroker.protocol.messages.fetch`
- :mod:`pykbroker.protocol.messages.offsets`
- :mod:`pykbroker.protocol.messages.topics`
- :mod:`pykbroker.protocol.messages.configs`
- :mod:`pykbroker.protocol.messages.groups`
- :mod:`pykbroker.protocol.messages.consumer_groups`
- :mod:`pykbroker.protocol.messages.share_groups`
- :mod:`pykbroker.protocol.messages.group_offsets`
- :mod:`pykbroker.protocol.messages.transactions`
- :mod:`pykbroker.protocol.messages.raft`
- :mod:`pykbroker.protocol.messages.replication`
- :mod:`pykbroker.protocol.messages.share_state`
- :mod:`pykbroker.protocol.messages.share_fetch`
- :mod:`pykbroker.protocol.messages.metadata_records`
- :mod:`pykbroker.protocol.messages.coordinator_records`
"""
