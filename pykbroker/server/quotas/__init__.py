"""Client quotas on the broker (KIP-13, KIP-55, KIP-219): ClientQuotaManager (produce and fetch byte rates),
the sampled rate they measure with, and the throttled-channel reaper. See docs/ARCHITECTURE.md §2."""
