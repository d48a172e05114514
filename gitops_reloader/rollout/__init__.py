"""Rollouts: when a workload's rollout is done or failed, and how many may roll at once."""
