"""Reload state kept outside the workloads (``--state-store configmap``): see docs/state-store.md."""
