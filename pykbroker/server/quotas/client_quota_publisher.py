"""ClientQuotaPublisher: the ``ip`` entities' ``connection_creation_rate`` applied to a controller-only node's
ConnectionQuotas (Kafka's ``DynamicClientQuotaPublisher`` with ``ClientQuotaMetadataManager`` on a
ControllerServer). A broker's BrokerMetadataPublisher does the same for its own (and its quota managers).

Called on the metadata loader's thread: first with the whole image as a delta from the empty image, then with
each committed change; acts only when client quotas changed.
"""

from __future__ import annotations

from pykbroker.metadata.publisher import MetadataPublisher


class ClientQuotaPublisher(MetadataPublisher):
    def __init__(self, connection_quotas) -> None:
        """``connection_quotas``: the node's :class:`~pykbroker.network.connection_quotas.ConnectionQuotas`."""
        self.connection_quotas = connection_quotas

    def on_metadata_update(self, delta, new_image) -> None:
        if delta.client_quota_changes:
            self.connection_quotas.update_ip_connection_rates(new_image.client_quotas)
