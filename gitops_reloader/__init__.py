"""gitops-reloader: reload Kubernetes workloads when their ConfigMaps or Secrets change.

``__version__`` is the project's one version source: setuptools reads it for the package
metadata (``[tool.setuptools.dynamic]`` in pyproject.toml), the Helm chart's ``version`` and
``appVersion`` and the top CHANGELOG entry are kept equal to it by
``tests/unit/test_release.py``, and a release tag is ``v`` followed by it.
"""

__version__ = "0.1.0"
