"""HyperPod Autopilot's command line, ``autopilot``: its own distribution, installed with the rules it
shares with the Lambda layer (``pipx install ./cli --preinstall ./layers/autopilot/autopilot_config``).

Its request validation is ``autopilot_config`` (the distribution hyperpod-autopilot-config, the one
copy the layer runs too); nothing of the layer's own code comes along: no Powertools, no boto3.
"""

__version__ = "0.2.0"
