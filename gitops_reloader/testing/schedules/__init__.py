"""A schedule checker for the controller, with an oracle that reads the cluster (issue 39).

Modelled on Sieve (OSDI 2022, "Automatic Reliability Testing for Cluster Management
Controllers": perturb the controller with intermediate, stale and unobserved states) and on
property-based stateful testing (Hypothesis' rule-based state machines, shrinking a failing run
to a minimal one). Seeded random schedules (:mod:`.steps`) run against the API test server,
with the controller in-process on a fake clock and the Deployment controller and kubelet played
a step at a time (:mod:`.kubelet`, :mod:`.world`); once the faults stop and the windows open,
the oracle (:mod:`.oracle`) checks from the cluster alone that every pod runs the last data of
every source it reads, and that nothing rolled twice, in a closed window or past a brake. A
failing schedule prints its seed, what broke and its shrunk steps (:mod:`.checker`), and
``python -m gitops_reloader.testing.schedules --seed N`` replays it.
"""

from gitops_reloader.testing.schedules.checker import (
    BUDGET,
    DEFAULT,
    STATE_STORE,
    VARIANTS,
    Result,
    explore,
    report,
    run,
    shrink,
)
from gitops_reloader.testing.schedules.steps import Step, Variant, generate

__all__ = ["BUDGET", "DEFAULT", "STATE_STORE", "VARIANTS", "Result", "Step", "Variant", "explore", "generate",
           "report", "run", "shrink"]
