"""HyperPod Autopilot's command line, ``autopilot``: its own distribution (``pipx install ./cli``).

It carries the API's request validation (``autopilot.models`` / ``autopilot.validation``, built from
the one copy in the Lambda layer) and nothing else of the layer: no Powertools, no boto3.
"""

__version__ = "0.2.0"
