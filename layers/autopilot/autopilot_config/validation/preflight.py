"""The online checks for the common causes of a failed create (issue 23): instance quotas, free IPs
in the subnets, a route to S3, the lifecycle scripts' contents and the execution role's access to them.

Each finds before CreateCluster what would otherwise surface an hour later as "Lifecycle scripts did
not run successfully" or a capacity failure. Where AWS cannot tell us (no quota listed, a default route
to a transit gateway), the check says unchecked or stays quiet rather than refuse a config that works.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from autopilot_config.validation.documents import (
    ClusterDocuments,
    InstanceGroup,
    Located,
    as_int,
    as_str,
    parse_s3_uri,
    s3_key,
    strings,
)
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG

if TYPE_CHECKING:
    from autopilot_config.validation.online import OnlineChecker

# IPv4 addresses one node takes in its subnet, for instance types that launch with one EFA (with
# ENA) interface per network card. The counts are the EC2 network cards of each type ("Network
# cards", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-eni.html#network-cards, and
# "Maximize network bandwidth on Amazon EC2 instances with multiple network cards",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html: "P5 and P5e instances
# support up to 32 network cards"). That HyperPod attaches one addressed interface per card is
# unverified (docs/sandbox.md); any other type is counted at one address (its primary interface).
IPS_PER_INSTANCE: Mapping[str, int] = {
    "ml.p4d.24xlarge": 4,
    "ml.p4de.24xlarge": 4,
    "ml.p5.48xlarge": 32,
    "ml.p5e.48xlarge": 32,
    "ml.p5en.48xlarge": 16,
    "ml.trn1.32xlarge": 8,
    "ml.trn1n.32xlarge": 16,
}

# Service Quotas names HyperPod's instance quotas "<type> for cluster usage" (SageMaker HyperPod
# prerequisites, "SageMaker HyperPod quotas": search the Amazon SageMaker quotas for "cluster usage").
QUOTA_SERVICE = "sagemaker"
QUOTA_NAME = "{instance_type} for cluster usage"

SCRIPT_READ_BYTES = 65536  # enough for any on_create.sh; the rest of a large file is not read
# A script an on_create.sh runs: a relative *.sh or *.py word (``python3 lifecycle_script.py``,
# ``bash ./utils/setup.sh``), not an absolute path or one built from a variable.
_NAMED_SCRIPT = re.compile(r"(?:^|[\s;&|(\"'=])(?:\./)?(?P<name>[\w.-][\w./-]*\.(?:sh|py))(?=$|[\s;&|)\"'])")


# -- quotas -------------------------------------------------------------------------------------------
def check_quotas(checker: OnlineChecker, docs: ClusterDocuments, findings: Findings) -> None:
    """Each instance type's count against the account's "<type> for cluster usage" quota. Groups
    on a training plan are left out: their capacity is the plan's (whether the quota applies to
    them too is unverified)."""
    requested: dict[str, tuple[int, list[tuple[InstanceGroup, int]]]] = {}
    for group in docs.regular_groups:
        instance_type = as_str(group.spec.get("InstanceType"))
        count = as_int(group.spec.get("InstanceCount"))
        if instance_type is None or not count or group.spec.get("TrainingPlanArn") is not None:
            continue
        total, groups = requested.get(instance_type, (0, []))
        requested[instance_type] = (total + count, [*groups, (group, count)])
    if not requested:
        return
    first = next(iter(requested.values()))[1][0][0]
    quotas = _quota_values(checker, Located(CLUSTER_CONFIG, f"{first.path}.InstanceCount", ""), findings)
    if quotas is None:
        return
    for instance_type, (total, groups) in requested.items():
        where = f"{groups[0][0].path}.InstanceCount"
        name = QUOTA_NAME.format(instance_type=instance_type)
        quota = quotas.get(name)
        if quota is None:
            findings.unchecked(
                CLUSTER_CONFIG,
                where,
                f"could not check the quota for {instance_type}: Service Quotas lists no '{name}' quota"
                f"{checker.in_region}",
            )
            continue
        value, code = quota
        if value < total:
            counts = ", ".join(f"{group.path}: {count}" for group, count in groups)
            findings.error(
                CLUSTER_CONFIG,
                where,
                f"the account's quota '{name}' ({code}) is {value:g}{checker.in_region}, below the "
                f"{total} requested ({counts}); request an increase in Service Quotas before creating "
                "(it takes days)",
            )


def _quota_values(
    checker: OnlineChecker, where: Located, findings: Findings
) -> dict[str, tuple[float, str]] | None:
    """Quota name -> (value, code): the applied values, and the defaults of the quotas that have
    none (ListServiceQuotas leaves out a quota whose applied value is not available)."""
    values: dict[str, tuple[float, str]] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):
        try:
            # SageMaker has hundreds of quotas: the largest page (100) keeps the calls few.
            paginator = checker.service_quotas.get_paginator(operation)
            pages = paginator.paginate(ServiceCode=QUOTA_SERVICE, PaginationConfig={"PageSize": 100})
            for page in pages:
                for quota in page.get("Quotas", []):
                    if "QuotaName" in quota and "Value" in quota:  # applied values override defaults
                        values[quota["QuotaName"]] = (quota["Value"], quota.get("QuotaCode", "?"))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            message = f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}".rstrip(": ")
            findings.unchecked(where.file, where.path, f"could not check the instance quotas: {message}")
            return None
        except BotoCoreError as exc:
            findings.unchecked(where.file, where.path, f"could not check the instance quotas: {exc}")
            return None
    return values


# -- subnets: free addresses and a way to S3 ------------------------------------------------------------
@dataclass(frozen=True)
class SubnetUse:
    """A set of subnets and the groups that launch into it."""

    where: Located  # the Subnets list of the VpcConfig or OverrideVpcConfig
    subnet_ids: tuple[str, ...]
    groups: tuple[InstanceGroup, ...]


def subnet_uses(docs: ClusterDocuments) -> list[SubnetUse]:
    """Which subnets each group's instances take addresses in (its OverrideVpcConfig, else VpcConfig)."""
    uses: dict[tuple[str, ...], SubnetUse] = {}
    bases = dict(docs.vpc_configs())
    for group in docs.groups:
        base = f"{group.path}.OverrideVpcConfig"
        if base not in bases:
            base = "VpcConfig"
        subnet_ids = tuple(sorted({subnet for _, subnet in strings(bases.get(base), "Subnets")}))
        if not subnet_ids:
            continue
        where = Located(CLUSTER_CONFIG, f"{base}.Subnets", "")
        use = uses.get(subnet_ids) or SubnetUse(where, subnet_ids, ())
        uses[subnet_ids] = SubnetUse(use.where, subnet_ids, (*use.groups, group))
    return list(uses.values())


def check_free_addresses(
    uses: Iterable[SubnetUse], subnets: Mapping[str, Mapping[str, Any]], findings: Findings
) -> None:
    """Enough free IPv4 addresses for every node: at least one each (an error when even that does
    not fit), and the EFA interfaces of IPS_PER_INSTANCE (a warning: the figure is an estimate)."""
    for use in uses:
        if any(subnet_id not in subnets for subnet_id in use.subnet_ids):
            continue  # a subnet that does not exist or could not be described is reported already
        free = sum(as_int(subnets[s].get("AvailableIpAddressCount")) or 0 for s in use.subnet_ids)
        nodes = 0
        needs: list[str] = []
        need = 0
        for group in use.groups:
            count = as_int(group.spec.get("InstanceCount")) or 0
            instance_type = as_str(group.spec.get("InstanceType")) or "?"
            per_node = IPS_PER_INSTANCE.get(instance_type, 1)
            nodes += count
            need += count * per_node
            needs.append(f"{group.path}: {count} x {instance_type} x {per_node}")
        listed = ", ".join(use.subnet_ids)
        if free < nodes:
            findings.error(
                use.where.file,
                use.where.path,
                f"the subnets ({listed}) have {free} free IP addresses but the {nodes} nodes need at least "
                "one each; use larger subnets or add subnets",
            )
        elif free < need:
            findings.warning(
                use.where.file,
                use.where.path,
                f"the subnets ({listed}) have {free} free IP addresses but the nodes need about {need} "
                f"({'; '.join(needs)}: EFA instances take an address per network card); launches may fail "
                "with too few addresses",
            )


def check_s3_routes(
    checker: OnlineChecker,
    subnets: Mapping[str, tuple[Located, Mapping[str, Any]]],
    findings: Findings,
) -> None:
    """Each subnet's route table reaches S3 through a gateway endpoint, a NAT gateway or any other
    default route that is not an internet gateway (the nodes have no public addresses); an S3
    interface endpoint in the VPC also counts. Without one the nodes cannot download the lifecycle
    scripts and the create fails after its instances launch."""
    vpcs: dict[str, list[tuple[Located, Mapping[str, Any]]]] = {}
    for where, subnet in subnets.values():
        if (vpc_id := as_str(subnet.get("VpcId"))) is not None:
            vpcs.setdefault(vpc_id, []).append((where, subnet))
    for vpc_id, members in vpcs.items():
        first = members[0][0]
        vpc_filter: list[Any] = [{"Name": "vpc-id", "Values": [vpc_id]}]
        tables = checker.ask(
            findings,
            first,
            f"the route tables of {vpc_id}",
            partial(checker.ec2.describe_route_tables, Filters=vpc_filter),
        )
        endpoints = checker.ask(
            findings,
            first,
            f"the VPC endpoints of {vpc_id}",
            partial(checker.ec2.describe_vpc_endpoints, Filters=vpc_filter),
        )
        if tables is None or endpoints is None:
            continue
        # com.amazonaws.<region>.s3 (cn.com.amazonaws.<region>.s3 in China)
        s3_endpoints = [
            endpoint
            for endpoint in endpoints.get("VpcEndpoints", [])
            if str(endpoint.get("State", "available")).lower() == "available"
            and str(endpoint.get("ServiceName", "")).endswith(".s3")
        ]
        if any(endpoint.get("VpcEndpointType") == "Interface" for endpoint in s3_endpoints):
            continue
        gateway_tables = {
            table_id for endpoint in s3_endpoints for table_id in endpoint.get("RouteTableIds", [])
        }
        for where, subnet in members:
            table = _route_table_of(str(subnet.get("SubnetId")), tables.get("RouteTables", []))
            if table is None or table.get("RouteTableId") in gateway_tables or _default_route_out(table):
                continue
            findings.error(
                where.file,
                where.path,
                f"subnet {where.value} cannot reach S3: its route table {table.get('RouteTableId')} has no "
                "S3 gateway endpoint and no NAT gateway route (0.0.0.0/0), so the nodes cannot download "
                "the lifecycle scripts; add an S3 gateway endpoint to the route table or a NAT gateway route",
            )


def _route_table_of(subnet_id: str, tables: list[Any]) -> Mapping[str, Any] | None:
    """The table associated with the subnet, else the VPC's main table."""
    main = None
    for table in tables:
        for association in table.get("Associations", []):
            if association.get("SubnetId") == subnet_id:
                return table  # type: ignore[no-any-return]
            if association.get("Main"):
                main = table
    return main


def _default_route_out(table: Mapping[str, Any]) -> bool:
    """A working 0.0.0.0/0 route that is not to an internet gateway (NAT gateway, transit gateway,
    firewall or appliance: whether those reach S3 is the network's business, not checked here)."""
    for route in table.get("Routes", []):
        if route.get("DestinationCidrBlock") != "0.0.0.0/0" or route.get("State") == "blackhole":
            continue
        if not str(route.get("GatewayId", "")).startswith("igw-"):
            return True
    return False


# -- lifecycle scripts: contents and the role's access -------------------------------------------------
def read_script(
    checker: OnlineChecker, bucket: str, key: str, where: Located, findings: Findings
) -> bytes | None:
    """The first SCRIPT_READ_BYTES of an object known to exist; None (unchecked) if it cannot be read."""
    try:
        response = checker.s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{SCRIPT_READ_BYTES - 1}")
        return response["Body"].read()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "Unknown")
        findings.unchecked(where.file, where.path, f"could not read s3://{bucket}/{key}: {code}")
    except BotoCoreError as exc:
        findings.unchecked(where.file, where.path, f"could not read s3://{bucket}/{key}: {exc}")
    return None


def check_script(
    checker: OnlineChecker, where: Located, bucket: str, key: str, findings: Findings, *, prefix: str
) -> None:
    """An OnCreate script: Unix line endings, and every script it names is next to it."""
    body = read_script(checker, bucket, key, where, findings)
    if body is None:
        return
    uri = f"s3://{bucket}/{key}"
    if b"\r\n" in body:
        findings.error(
            where.file,
            where.path,
            f"{uri} has Windows (CRLF) line endings: bash on the nodes fails on them "
            "(\"$'\\r': command not found\"); convert it with dos2unix and upload it again",
        )
    own_name = key.rsplit("/", 1)[-1]
    for name in named_scripts(body.decode("utf-8", errors="replace")):
        if name == own_name:
            continue
        named_key = s3_key(prefix, name)
        if checker.object_exists(bucket, named_key, where, findings, required=False) is False:
            findings.error(
                where.file,
                where.path,
                f"{uri} runs {name}, but s3://{bucket}/{named_key} does not exist",
            )


def named_scripts(text: str) -> list[str]:
    """The relative *.sh / *.py files a shell script mentions outside comments, in order."""
    found: dict[str, None] = {}
    for line in text.splitlines():
        code = line.strip()
        if code.startswith("#"):
            continue
        for match in _NAMED_SCRIPT.finditer(code):
            name = match.group("name")
            if not name.startswith("/") and ".." not in name.split("/"):
                found[name] = None
    return list(found)


def check_roles_read_scripts(
    checker: OnlineChecker, docs: ClusterDocuments, known_roles: set[str], findings: Findings
) -> None:
    """Each group's ExecutionRole (of those IAM answered for) against its OnCreate script, once per
    role and script."""
    seen: set[tuple[str, str, str]] = set()
    for group in docs.regular_groups:
        lifecycle = group.lifecycle or {}
        source = parse_s3_uri(as_str(lifecycle.get("SourceS3Uri")) or "")
        script = as_str(lifecycle.get("OnCreate"))
        role = as_str(group.spec.get("ExecutionRole"))
        if source is None or script is None or role not in known_roles:
            continue
        bucket, key = source[0], s3_key(source[1], script)
        if (role, bucket, key) not in seen:
            seen.add((role, bucket, key))
            where = Located(CLUSTER_CONFIG, f"{group.path}.ExecutionRole", role)
            check_role_access(checker, where, bucket, key, findings)


def check_role_access(
    checker: OnlineChecker, role: Located, bucket: str, key: str, findings: Findings
) -> None:
    """Whether the execution role's own policies let it read the script (IAM's policy simulator).
    An explicit deny is an error; no allow is a warning, since the bucket's policy may grant it."""
    partition = role.value.split(":")[1] if role.value.count(":") >= 5 else "aws"
    for action, resource in (
        ("s3:GetObject", f"arn:{partition}:s3:::{bucket}/{key}"),
        ("s3:ListBucket", f"arn:{partition}:s3:::{bucket}"),
    ):
        try:
            response = checker.iam.simulate_principal_policy(
                PolicySourceArn=role.value, ActionNames=[action], ResourceArns=[resource]
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") != "NoSuchEntity":  # a missing role is the role check's error
                message = f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}".rstrip(": ")
                what = f"could not simulate {action} on {resource}: {message}"
                findings.unchecked(role.file, role.path, what)
            return
        except BotoCoreError as exc:
            findings.unchecked(role.file, role.path, f"could not simulate {action} on {resource}: {exc}")
            return
        decisions = {result.get("EvalDecision") for result in response.get("EvaluationResults", [])}
        name = role.value.rsplit("/", 1)[-1]
        if "explicitDeny" in decisions:
            findings.error(
                role.file,
                role.path,
                f"role {name} is denied {action} on {resource} (an explicit Deny in its policies): "
                "HyperPod cannot download the lifecycle scripts",
            )
        elif decisions and decisions != {"allowed"}:
            findings.warning(
                role.file,
                role.path,
                f"role {name}'s policies do not allow {action} on {resource}: unless the bucket's policy "
                "grants it, HyperPod cannot download the lifecycle scripts (AccessDenied)",
            )


# -- the Slurm agent (docs/agent.md) -------------------------------------------------------------------
# Where the operator puts the agent: the controller group's lifecycle prefix, as the scripts' own files.
AGENT_INSTALL_SCRIPT = "autopilot-agent/install.sh"
# An API's regional endpoint: https://<api-id>.execute-api.<region>.amazonaws.com[.cn]/<stage>
_EXECUTE_API_URL = re.compile(
    r"^https://(?P<api>[a-z0-9]+)\.execute-api\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<stage>[^/]+)"
)


def controller_group(docs: ClusterDocuments) -> InstanceGroup | None:
    """The Slurm controller group: SlurmConfig.NodeType Controller, else provisioning's controller_group."""
    if docs.is_eks:
        return None
    for group in docs.regular_groups:
        if group.slurm_node_type == "Controller":
            return group
    name = as_str((docs.provisioning or {}).get("controller_group"))
    return docs.group_named(name) if name is not None else None


def agent_route_arn(api_endpoint: str | None, role_arn: str, cluster_name: str) -> str | None:
    """The agent's route as execute-api:Invoke names it, for the API at ``api_endpoint``; None when the
    endpoint is not an execute-api URL (its API id and stage are then unknown)."""
    found = _EXECUTE_API_URL.match(api_endpoint or "")
    if found is None:
        return None
    partition, account = role_arn.split(":")[1], role_arn.split(":")[4]
    return (
        f"arn:{partition}:execute-api:{found['region']}:{account}:{found['api']}/{found['stage']}"
        f"/POST/agent/{cluster_name}/reports"
    )


def check_agent_role(checker: OnlineChecker, docs: ClusterDocuments, findings: Findings) -> None:
    """When the controller group's lifecycle prefix holds the agent's install.sh: its ExecutionRole
    must be the controller's own (AgentFunction trusts reports from that role, and any job on another
    group's node could read the role's credentials from IMDS) and may invoke the agent's route."""
    group = controller_group(docs)
    if group is None:
        return
    source_uri = as_str((group.lifecycle or {}).get("SourceS3Uri")) or ""
    source = parse_s3_uri(source_uri)
    role = as_str(group.spec.get("ExecutionRole"))
    if source is None or role is None or role.count(":") < 5:
        return
    where = Located(CLUSTER_CONFIG, f"{group.path}.LifeCycleConfig.SourceS3Uri", source_uri)
    # Only an agent known to be installed is checked: a prefix S3 will not show is the script checks' to
    # report, not a reason to call every cluster's agent unchecked (their findings are dropped here).
    key = s3_key(source[1], AGENT_INSTALL_SCRIPT)
    if checker.object_exists(source[0], key, where, Findings(), required=False) is not True:
        return
    role_where = Located(CLUSTER_CONFIG, f"{group.path}.ExecutionRole", role)
    sharing = [
        g.name for g in docs.regular_groups if g is not group and as_str(g.spec.get("ExecutionRole")) == role
    ]
    if sharing:
        findings.warning(
            role_where.file,
            role_where.path,
            f"the Slurm controller's role is also the role of {', '.join(str(n) for n in sharing)}: any job "
            "there can read its credentials and report to Autopilot as the controller's agent; give the "
            "controller group a role of its own (docs/agent.md)",
        )
    cluster_name = as_str(docs.config.get("ClusterName")) or "*"
    route = agent_route_arn(checker.api_endpoint, role, cluster_name)
    if route is None:
        findings.unchecked(
            role_where.file,
            role_where.path,
            "whether the role may call the Slurm agent's route (execute-api:Invoke): Autopilot's API "
            "endpoint is not known (pass --endpoint or run `autopilot configure`)",
        )
        return
    _check_invoke(checker, role_where, route, findings)


def _check_invoke(checker: OnlineChecker, role: Located, route: str, findings: Findings) -> None:
    try:
        response = checker.iam.simulate_principal_policy(
            PolicySourceArn=role.value, ActionNames=["execute-api:Invoke"], ResourceArns=[route]
        )
    except (ClientError, BotoCoreError) as exc:
        if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == "NoSuchEntity":
            return  # the role check reports a missing role
        findings.unchecked(role.file, role.path, f"could not simulate execute-api:Invoke on {route}: {exc}")
        return
    decisions = {result.get("EvalDecision") for result in response.get("EvaluationResults", [])}
    if decisions != {"allowed"}:
        denied = "is denied" if "explicitDeny" in decisions else "is not allowed"
        findings.warning(
            role.file,
            role.path,
            f"role {role.value.rsplit('/', 1)[-1]} {denied} execute-api:Invoke on {route}: the Slurm agent "
            "installed on the controller cannot report, so repairs go on without Slurm (docs/agent.md "
            "has the policy statement)",
        )
