"""ClientQuotaPublisher: the committed client quotas applied on a controller-only node (Kafka's
``DynamicClientQuotaPublisher`` with ``ClientQuotaMetadataManager`` on a ControllerServer): the ``ip`` entities'
``connection_creation_rate`` to its ConnectionQuotas, and the user/client-id quotas to the controller listener's
``QuotaManagers``, which apply ``controller_mutation_rate`` to the requests brokers forward in an Envelope
(KIP-590, KIP-599). A broker's BrokerMetadataPublisher does the same for its own.

Threading: called on the metadata loader's thread: first with the whole image as a delta from the empty image,
then with each committed change; acts only when client quotas changed. The targets lock their own state.
"""

from __future__ import annotations

from pykbroker.metadata.publisher import MetadataPublisher


class ClientQuotaPublisher(MetadataPublisher):
    def __init__(self, connection_quotas, quota_managers=None) -> None:
        """``connection_quotas``: the node's :class:`~pykbroker.network.connection_quotas.ConnectionQuotas`;
        ``quota_managers``: the controller listener's QuotaManagers (None: none)."""
        self.connection_quotas = connection_quotas
        self.quota_managers = quota_managers

    def on_metadata_update(self, delta, new_image) -> None:
        if delta.client_quota_changes:
            self.connection_quotas.update_ip_connection_rates(new_image.client_quotas)
            if self.quota_managers is not None:
                self.quota_managers.update_quotas(new_image.client_quotas)
