"""Test objects held to what the API test server would store: custom resources through their CRD.

Unit tests that hand a custom resource straight to the code under test (a fake API, no
server) wrap their builders in ``as_stored``, so an Application that no cluster would
accept (no ``spec.project``, a ``sources`` entry without ``repoURL``) or would store
differently (an unknown field pruned) cannot pass a test. Kinds without an installed CRD
are returned as they are; ``tests/unit/testing`` checks that the CRDs are installed.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from gitops_reloader.testing.apiserver.crdschema import CrdSchemas, default_crd_paths

CRDS = CrdSchemas.load(default_crd_paths())


def as_stored(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` itself, once the test server's admission has accepted it without changing it.

    Raises the server's 422 ``ApiError`` for a schema violation, ``AssertionError`` when
    admission would prune or default something.
    """
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    name = str((obj.get("metadata") or {}).get("name", ""))
    kept = CRDS.admit(group, version, str(obj.get("kind", "")), name, copy.deepcopy(obj))
    assert kept == obj, (
        f"{obj.get('kind')}/{name} would be stored differently:\n"
        f"sent   {json.dumps(obj, sort_keys=True)}\nstored {json.dumps(kept, sort_keys=True)}"
    )
    return obj
