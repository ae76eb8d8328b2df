"""HyperPod Autopilot: domain logic and AWS adapters shared by every Lambda function (the layer)."""

# boto3 before anything else of the layer (every function imports it anyway), as a bare handler and the
# bench's floors do: imported after the layer's pydantic models, the same imports cost a function
# ~20-30 ms more kernel time in its init (~2,500 more minor page faults: the heap grows in another
# order), 0.15-0.25x of the baseline for ClusterEventsFunction and LoginTargetsFunction
# (docs/operations.md, "Cold start"; tests/unit/test_cold_start.py holds the order).
import boto3  # noqa: F401

__version__ = "0.1.0"
