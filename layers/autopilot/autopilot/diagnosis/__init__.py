"""Why a HyperPod create or node launch failed: a catalog of causes (data) and a matcher over
HyperPod's lifecycle logs, FailureMessage and cluster events (docs/operations.md, "Failure diagnosis")."""
