"""Process-wide test setup, before any module of the product is imported.

Powertools reads POWERTOOLS_METRICS_NAMESPACE when ``autopilot.observability`` creates its Metrics,
once per process: whichever test imported it first decided the namespace for every later test in that
worker (a handler's ``@metrics.log_metrics`` raises without one). The functions get it from the
template's Globals; the tests get the same value here, whatever runs first.
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "HyperPodAutopilot")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "hyperpod-autopilot")
