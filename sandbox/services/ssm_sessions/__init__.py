"""SSM Session Manager simulator: StartSession / DescribeSessions / TerminateSession on moto.

moto 5.2.5's SSM has no sessions. :func:`_patch_moto_ssm_response` (the one seam) adds the three
operations to moto's ``SimpleSystemManagerResponse`` so they answer boto3 under ``mock_aws`` and
over HTTP from ``ThreadedMotoServer`` alike; moto serializes the results against botocore's ssm
model. The state lives here, in the :class:`SsmSessionsSimulator` of the request's account and region,
and time comes from the :class:`SandboxClock`. Session Manager answers in every region, so the
sandbox does too: the simulators installed by hand (the Sandbox's home region, a test's) are
*installed*; a request for any other (account, region) gets one *spawned* from the first installed
one on first use (same clock and options), ticked with it and gone when it is uninstalled.

StartSession reaches only a connected target: by default a live HyperPod node of that account and
region, ``sagemaker-cluster:<cluster-id>_<instance-group>-<instance-id>`` (see
:func:`hyperpod_node_targets`); anything else is ``TargetNotConnected``. Caller identities are IAM
ARNs, as AWS spells them: an IAM user's ``arn:aws:iam::…:user/…``, an assumed role's
``arn:aws:sts::…:assumed-role/<role>/<session>`` (the AWS CLI reference's DescribeSessions example),
and the sandbox's own keys (which moto reports as ``sts::…:user/moto``) the account root.

Every StartSession (through the API or :meth:`SsmSessionsSimulator.start_session_as`) also puts
the CloudTrail-shaped ``AWS API Call via CloudTrail`` event on that region's EventBridge bus, as a
trail would, *after* the call returned: CloudTrail's delivery to EventBridge is best effort and
delayed, so the event is queued ``cloudtrail_delay_seconds`` of simulated time and published by
:meth:`SsmSessionsSimulator.tick`. The SessionGuard rule matches it with moto's real pattern matcher.

Behaviour chosen where AWS documents none (unverified):
- a session starts ``Connected``; TerminateSession makes it ``Terminating`` (still Active) and
  ``Terminated`` (History) ``terminating_seconds`` later;
- TerminateSession of an unknown or already ended session succeeds and echoes the id (the
  operation models no not-found error);
- DescribeSessions lists newest first; several filters are ANDed;
- the CloudTrail delay (default 30 simulated seconds) and the Terminating time (default 5);
- with ``max_session_duration_minutes`` given, sessions older than that end as ``Terminated``.

The package, by job: model.py (limits, statuses, the error, a session), identity.py (the caller and
its CloudTrail identity), simulator.py (``SsmSessionsSimulator``), seam.py (moto's SSM responses, the
simulators by (account, region)).
"""

from sandbox.services.ssm_sessions.identity import CallerIdentity
from sandbox.services.ssm_sessions.model import DEFAULT_DOCUMENT, OPERATIONS, SessionsError, SimulatedSession
from sandbox.services.ssm_sessions.seam import hyperpod_node_targets, simulator_for
from sandbox.services.ssm_sessions.simulator import SsmSessionsSimulator

__all__ = [
    "DEFAULT_DOCUMENT",
    "OPERATIONS",
    "CallerIdentity",
    "SessionsError",
    "SimulatedSession",
    "SsmSessionsSimulator",
    "hyperpod_node_targets",
    "simulator_for",
]
