"""Self-healing (issue 9): decide what a node's fault needs, claim its repair exactly once, start the
ReplaceNode workflow, and pause repairs when too many nodes fail at once (docs/operations.md)."""
