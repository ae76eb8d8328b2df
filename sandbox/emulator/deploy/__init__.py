"""Deploy a SAM template into moto: the sandbox's CloudFormation.

AWS's own SAM transform (aws-sam-translator, ``transform``) turns the template into CloudFormation;
the deployer (``engine``) creates each plain CloudFormation resource with the provider of its type
(``resource_providers/aws_<service>_<type>.py``), in dependency order, intrinsics resolved
(``intrinsics``). What the sandbox cannot deploy faithfully is a loud ``TemplateError``.
"""

from .engine import deploy
from .stack import ApiRoute, ApiSpec, FunctionSpec, Resource, ScheduleSpec, Stack, TemplateError, Throttle
from .template import load_template

__all__ = [
    "ApiRoute",
    "ApiSpec",
    "FunctionSpec",
    "Resource",
    "ScheduleSpec",
    "Stack",
    "TemplateError",
    "Throttle",
    "deploy",
    "load_template",
]
