"""HyperPod Autopilot's rules for a CreateCluster request, shared by the Lambda layer and the CLI.

What belongs here: the models of the documents a user writes (``models``: cluster-config.json,
provisioning-parameters.json, the name and text constraints AWS puts on them, the instance types
HyperPod takes) and the checks run on them (``validation``: the offline rules, the stack's caps and
allowlists, the ``--aws`` checks). It runs on Python 3.10+ with pydantic and botocore only, and
imports nothing from ``autopilot`` (the layer's package) or ``autopilot_cli``: both import it.
"""

__version__ = "0.1.0"
