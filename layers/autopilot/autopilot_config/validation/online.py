"""The checks that ask AWS (``autopilot validate --aws``): do the named resources exist and fit HyperPod?

A check that cannot run (access denied, no credentials, throttled, endpoint unreachable) is reported
as unchecked: the config is not proven wrong, but the user must know the check did not happen
(``autopilot validate --aws`` then exits non-zero).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from botocore.exceptions import BotoCoreError, ClientError

from autopilot_config.validation import preflight
from autopilot_config.validation.documents import (
    ClusterDocuments,
    FsxReference,
    Located,
    as_mapping,
    as_str,
    parse_s3_uri,
    s3_key,
    strings,
)
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_fsx import FSxClient
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")

_SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
_PROVISIONING_FILE = "provisioning_parameters.json"  # the name the lifecycle scripts read


class OnlineChecker:
    """Checks against the AWS account. Clients are injectable; otherwise they are made on first use
    in ``region``, by ``make_client(service, region)`` (the layer passes its cached clients,
    ``autopilot.aws.client``), else from ``session``, else from botocore's default session."""

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        *,
        region: str | None = None,
        ec2: EC2Client | None = None,
        s3: S3Client | None = None,
        iam: IAMClient | None = None,
        fsx: FSxClient | None = None,
        service_quotas: Any | None = None,
        api_endpoint: str | None = None,
        make_client: Callable[[str, str | None], Any] | None = None,
    ) -> None:
        self._session = session
        self._make_client = make_client
        # Autopilot's API (its base URL): the Slurm agent's route is checked against the controller's role.
        self.api_endpoint = api_endpoint
        self.region = region or (session.region_name if session is not None else None)
        self._clients: dict[str, Any] = {
            name: client
            for name, client in (
                ("ec2", ec2),
                ("s3", s3),
                ("iam", iam),
                ("fsx", fsx),
                ("service-quotas", service_quotas),
            )
            if client
        }

    @property
    def in_region(self) -> str:
        return f" in {self.region}" if self.region else ""

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            if self._make_client is not None:
                self._clients[service] = self._make_client(service, self.region)
            elif self._session is not None:
                self._clients[service] = self._session.client(service, region_name=self.region)  # type: ignore[call-overload]
            else:
                # botocore, not boto3: the one SDK this distribution depends on (the CLI has no boto3)
                from botocore.session import get_session  # noqa: PLC0415  (only when --aws runs)

                self._clients[service] = get_session().create_client(service, region_name=self.region)
        return self._clients[service]

    @property
    def ec2(self) -> EC2Client:
        return self._client("ec2")  # type: ignore[no-any-return]

    @property
    def s3(self) -> S3Client:
        return self._client("s3")  # type: ignore[no-any-return]

    @property
    def iam(self) -> IAMClient:
        return self._client("iam")  # type: ignore[no-any-return]

    @property
    def fsx(self) -> FSxClient:
        return self._client("fsx")  # type: ignore[no-any-return]

    @property
    def service_quotas(self) -> Any:  # no mypy_boto3 stubs for Service Quotas are installed
        return self._client("service-quotas")

    def check(self, docs: ClusterDocuments, findings: Findings) -> None:
        self._check_network(docs, findings)
        self._check_file_systems(docs, findings)
        self._check_lifecycle_scripts(docs, findings)
        roles = self._check_roles(docs, findings)
        preflight.check_roles_read_scripts(self, docs, roles, findings)
        preflight.check_agent_role(self, docs, findings)
        preflight.check_quotas(self, docs, findings)

    # -- plumbing ------------------------------------------------------------------------------------
    def ask(
        self,
        findings: Findings,
        where: Located,
        what: str,
        call: Callable[[], T],
        missing: Mapping[str, str] | None = None,
    ) -> T | None:
        """Run one AWS call; a not-found code becomes the error given in ``missing``, any other
        failure says that the check could not run."""
        try:
            return call()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "Unknown")
            if missing and code in missing:
                findings.error(where.file, where.path, missing[code])
            else:
                message = exc.response.get("Error", {}).get("Message", "")
                findings.unchecked(
                    where.file, where.path, f"could not check {what}: {code}: {message}".rstrip(": ")
                )
        except BotoCoreError as exc:
            findings.unchecked(where.file, where.path, f"could not check {what}: {exc}")
        return None

    # -- subnets and security groups -------------------------------------------------------------------
    def _check_network(self, docs: ClusterDocuments, findings: Findings) -> None:
        subnets: dict[str, tuple[Located, Mapping[str, Any]] | None] = {}
        groups: dict[str, dict[str, Any] | None] = {}
        for base, vpc in docs.vpc_configs():
            vpc_ids: set[str] = set()
            for index, subnet_id in strings(vpc, "Subnets"):
                where = Located(CLUSTER_CONFIG, f"{base}.Subnets[{index}]", subnet_id)
                if subnet_id not in subnets:
                    subnet = self._check_subnet(where, findings)
                    subnets[subnet_id] = (where, subnet) if subnet is not None else None
                if (found := subnets[subnet_id]) is not None and (vpc_id := found[1].get("VpcId")):
                    vpc_ids.add(vpc_id)
            for index, group_id in strings(vpc, "SecurityGroupIds"):
                where = Located(CLUSTER_CONFIG, f"{base}.SecurityGroupIds[{index}]", group_id)
                if group_id not in groups:
                    groups[group_id] = self._check_security_group(where, findings)
                group = groups[group_id]
                if group is not None and vpc_ids and group.get("VpcId") not in vpc_ids:
                    findings.error(
                        where.file,
                        where.path,
                        f"security group {group_id} is in {group.get('VpcId')} but the subnets are in "
                        f"{', '.join(sorted(vpc_ids))}",
                    )
        described = {subnet_id: found for subnet_id, found in subnets.items() if found is not None}
        preflight.check_free_addresses(
            preflight.subnet_uses(docs), {key: subnet for key, (_, subnet) in described.items()}, findings
        )
        preflight.check_s3_routes(self, described, findings)

    def _check_subnet(self, where: Located, findings: Findings) -> Mapping[str, Any] | None:
        subnet_id = where.value
        response = self.ask(
            findings,
            where,
            f"subnet {subnet_id}",
            lambda: self.ec2.describe_subnets(SubnetIds=[subnet_id]),
            missing={
                "InvalidSubnetID.NotFound": f"subnet {subnet_id} does not exist{self.in_region}",
                "InvalidSubnetID.Malformed": f"'{subnet_id}' is not a valid subnet ID",
            },
        )
        if response is None or not response.get("Subnets"):
            return None
        subnet = response["Subnets"][0]
        if subnet.get("MapPublicIpOnLaunch"):
            findings.error(
                where.file,
                where.path,
                f"subnet {subnet_id} is public (MapPublicIpOnLaunch is true); "
                "HyperPod nodes need private subnets",
            )
        return subnet

    def _check_security_group(self, where: Located, findings: Findings) -> dict[str, Any] | None:
        group_id = where.value
        response = self.ask(
            findings,
            where,
            f"security group {group_id}",
            lambda: self.ec2.describe_security_groups(GroupIds=[group_id]),
            missing={
                "InvalidGroup.NotFound": f"security group {group_id} does not exist{self.in_region}",
                "InvalidGroupId.Malformed": f"'{group_id}' is not a valid security group ID",
            },
        )
        if response is None or not response.get("SecurityGroups"):
            return None
        group: dict[str, Any] = dict(response["SecurityGroups"][0])
        for key, direction in (("IpPermissions", "inbound"), ("IpPermissionsEgress", "outbound")):
            if not _allows_all_traffic_to_itself(group_id, group.get(key, [])):
                preposition = "from" if direction == "inbound" else "to"
                findings.error(
                    where.file,
                    where.path,
                    f"security group {group_id} has no {direction} rule allowing all traffic {preposition} "
                    "itself (EFA needs it between the nodes)",
                )
        return group

    # -- FSx ----------------------------------------------------------------------------------------
    def _check_file_systems(self, docs: ClusterDocuments, findings: Findings) -> None:
        for reference in docs.fsx_references():
            file_system_id = reference.file_system_id
            # File caches (fc-) are described by a different API; only file systems are checked.
            if file_system_id is not None and file_system_id.startswith("fs-"):
                self._check_file_system(reference, file_system_id, findings)

    def _check_file_system(self, reference: FsxReference, file_system_id: str, findings: Findings) -> None:
        dns = reference.dns_name
        not_found = f"FSx file system {file_system_id} does not exist{self.in_region}"
        response = self.ask(
            findings,
            dns,
            f"FSx file system {file_system_id}",
            lambda: self.fsx.describe_file_systems(FileSystemIds=[file_system_id]),
            missing={"FileSystemNotFound": not_found},
        )
        if response is None:
            return
        if not response.get("FileSystems"):
            findings.error(dns.file, dns.path, not_found)
            return
        file_system = response["FileSystems"][0]
        kind = file_system.get("FileSystemType")
        if kind != reference.file_system_type:
            findings.error(
                dns.file,
                dns.path,
                f"{file_system_id} is an FSx for {kind} file system, not {reference.file_system_type}",
            )
            return
        if file_system.get("DNSName") != dns.value:
            findings.error(
                dns.file,
                dns.path,
                f"does not match file system {file_system_id} (its DNS name is {file_system.get('DNSName')})",
            )
        actual_mount = file_system.get("LustreConfiguration", {}).get("MountName")
        mount = reference.mount_name
        if mount is not None and actual_mount is not None and mount.value != actual_mount:
            findings.error(
                mount.file,
                mount.path,
                f"does not match file system {file_system_id} (its mount name is '{actual_mount}')",
            )

    # -- lifecycle scripts in S3 -----------------------------------------------------------------------
    def _check_lifecycle_scripts(self, docs: ClusterDocuments, findings: Findings) -> None:
        checked: set[tuple[str, str]] = set()
        prefixes: dict[tuple[str, str], Located] = {}
        for group in docs.regular_groups:
            lifecycle = group.lifecycle or {}
            parsed = parse_s3_uri(as_str(lifecycle.get("SourceS3Uri")) or "")
            if parsed is None:
                continue
            prefixes.setdefault(
                parsed, Located(CLUSTER_CONFIG, f"{group.path}.LifeCycleConfig.SourceS3Uri", "")
            )
            for key in ("OnCreate", "OnInitComplete"):
                script = as_str(lifecycle.get(key))
                if script is None:
                    continue
                bucket, key_name = parsed[0], s3_key(parsed[1], script)
                if (bucket, key_name) in checked:
                    continue
                checked.add((bucket, key_name))
                where = Located(CLUSTER_CONFIG, f"{group.path}.LifeCycleConfig.{key}", script)
                if self.object_exists(bucket, key_name, where, findings):
                    preflight.check_script(self, where, bucket, key_name, findings, prefix=parsed[1])
        if docs.provisioning is not None and docs.is_classic_slurm:
            for (bucket, prefix), where in prefixes.items():
                key_name = s3_key(prefix, _PROVISIONING_FILE)
                if self.object_exists(bucket, key_name, where, findings, required=False) is False:
                    findings.warning(
                        where.file,
                        where.path,
                        f"s3://{bucket}/{key_name} not found: the lifecycle scripts read the Slurm layout "
                        "from it (upload provisioning-parameters.json there)",
                    )

    def object_exists(
        self, bucket: str, key: str, where: Located, findings: Findings, *, required: bool = True
    ) -> bool | None:
        """True/False when S3 answered; None when the check could not run. A missing required
        object (or its bucket) is reported as an error here."""
        uri = f"s3://{bucket}/{key}"
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "Unknown")
            if code not in ("404", "NoSuchKey", "NoSuchBucket"):
                findings.unchecked(where.file, where.path, f"could not check {uri}: {code}")
                return None
            if required:
                if self._bucket_exists(bucket, where, findings) is False:
                    findings.error(where.file, where.path, f"bucket {bucket} does not exist")
                else:
                    findings.error(where.file, where.path, f"lifecycle script {uri} not found")
            return False
        except BotoCoreError as exc:
            findings.unchecked(where.file, where.path, f"could not check {uri}: {exc}")
            return None
        return True

    def _bucket_exists(self, bucket: str, where: Located, findings: Findings) -> bool | None:
        try:
            self.s3.head_bucket(Bucket=bucket)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "Unknown")
            return False if code in ("404", "NoSuchBucket") else None
        except BotoCoreError:
            return None
        return True

    # -- IAM ----------------------------------------------------------------------------------------
    def _check_roles(self, docs: ClusterDocuments, findings: Findings) -> set[str]:
        """Checks each role; returns the ARNs of those IAM knows (the others are reported)."""
        seen: set[str] = set()
        known: set[str] = set()
        for where in docs.role_arns():
            arn = where.value
            if arn in seen or ":role/" not in arn:
                continue
            seen.add(arn)
            name = arn.rsplit("/", 1)[-1]
            response = self.ask(
                findings,
                where,
                f"role {name}",
                partial(self.iam.get_role, RoleName=name),
                missing={"NoSuchEntity": f"IAM role {name} does not exist"},
            )
            if response is None:
                continue
            role = response["Role"]
            if role.get("Arn") != arn:
                findings.error(where.file, where.path, f"does not match the role's ARN ({role.get('Arn')})")
            else:
                known.add(arn)
            if not _trusts_sagemaker(role.get("AssumeRolePolicyDocument")):
                findings.error(
                    where.file,
                    where.path,
                    f"role {name} cannot be assumed by SageMaker: its trust policy does not allow "
                    f"{_SAGEMAKER_PRINCIPAL} to call sts:AssumeRole",
                )
        return known


def _allows_all_traffic_to_itself(group_id: str, permissions: Any) -> bool:
    for permission in permissions or []:
        if as_str(permission.get("IpProtocol")) != "-1":
            continue
        if any(pair.get("GroupId") == group_id for pair in permission.get("UserIdGroupPairs", [])):
            return True
    return False


def _trusts_sagemaker(document: Any) -> bool:
    # boto3 decodes IAM policy documents to dicts; a raw client may hand back URL-encoded JSON.
    if isinstance(document, str):
        document = json.loads(unquote(document))
    policy = as_mapping(document) or {}
    statements = policy.get("Statement", [])
    if isinstance(statements, Mapping):
        statements = [statements]
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(action in ("sts:AssumeRole", "sts:*", "*") for action in actions):
            continue
        services = (as_mapping(statement.get("Principal")) or {}).get("Service", [])
        services = [services] if isinstance(services, str) else services
        if _SAGEMAKER_PRINCIPAL in services:
            return True
    return False
