"""Pydantic models of the documents users hand to HyperPod Autopilot.

``cluster_config.CreateClusterRequest`` and ``provisioning.ProvisioningParameters``. Nothing is
imported here: the API's request models need only ``constraints``, and importing the whole
CreateCluster model at the API's init would cost its cold start for the read-only routes.
"""
