"""The sandbox: the whole control plane on an embedded, in-process AWS (moto + simulators). Never deployed."""
