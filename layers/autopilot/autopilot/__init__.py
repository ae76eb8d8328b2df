"""HyperPod Autopilot: domain logic and AWS adapters shared by every Lambda function (the layer)."""

__version__ = "0.1.0"
