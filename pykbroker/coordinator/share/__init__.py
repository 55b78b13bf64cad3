"""Share groups' persistent state (KIP-932): the Persister interface, the share coordinator and its records."""
