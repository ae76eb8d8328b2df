"""The REST API over the use cases in logic/: HTTP only (the models it serves are in autopilot.models).

routes.py assembles one Powertools resolver from one Router per resource (clusters.py, nodes.py,
spend.py, operations.py, healing.py; each included on the first request for its paths) and serves the
OpenAPI document; errors.py is the one table from an error to its status and body; body.py and
unavailable.py are the request's limits and AWS's 503; parameters.py, responses.py and wiring.py are
what the routers share (parameters, documented answers, the use cases' dependencies). A new route goes
in its resource's router, and its path in routes.ROUTER_PATHS; a new domain error, in the table.
"""
