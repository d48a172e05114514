"""The pieces :class:`~gitops_reloader.controller.Controller` wires together.

As client-go keeps informers, the work queue and the reconciler apart, each concern
lives in a module of its own behind a small interface and is tested alone:

- :mod:`.caches`: the informers and what they keep; lookups, never a LIST call;
- :mod:`.changes`: which informer deltas are data changes, and the changes waiting for
  their workload's turn (coalescing, batch groups);
- :mod:`.pause`: Deployments paused for a pause period, and their unpausing;
- :mod:`.startup`: which workloads are out of date after a restart or take-over;
- :mod:`.reconciler`: one workload (or one batch group) from pending changes to an
  emission, its outcome reported;
- :mod:`.follower`: the git sinks' commits followed into the cluster (engine, live
  template from the caches, rollout), injected into the sinks as their ``CommitFollower``.
"""
