"""The layer's pydantic models: what its functions receive, store and answer.

The REST API's bodies, the records of the state table, the events of EventBridge, SNS and Step
Functions, the Slurm agent's wire shapes. The documents a user writes (the CreateCluster request,
the provisioning parameters) and their constraints are ``autopilot_config.models``, shared with the
CLI. Nothing is imported here: each function imports only the models it uses (cold start).
"""
