"""The names Step Functions gives an aws-sdk task's errors, from one rule and botocore's model.

Step Functions names the error of ``arn:aws:states:::aws-sdk:<service>:<action>`` as
``ServiceName.ErrorName``, "both in PascalCase", e.g. ``AcmPca.ResourceNotFoundException`` and
``S3.BucketAlreadyExistsException`` ("Exception" added where the error's name lacks it) — the Step
Functions developer guide, "AWS SDK service integrations"
(https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html). ``AcmPca`` is
how the AWS SDK for Java v2 names ACM PCA's client, not botocore's ``ACMPCA`` nor the serviceId
``ACM PCA``; LocalStack's executor, checked against AWS by its snapshot tests, spells DynamoDB and
SFN ``DynamoDb`` and ``Sfn``, the Java v2 names again. So the rule here is the Java v2 code
generator's (``DefaultNamingStrategy.getServiceName`` and ``CodegenNamingUtils.pascalCase`` in
aws/aws-sdk-java-v2): split the model's serviceId into words, lower-case each word and capitalise its
first letter, drop a leading ``Amazon`` / ``Aws`` and a trailing ``Service``. That AWS applies it to
every service (``ResourceGroupsTaggingApi``, not ``ResourceGroupsTaggingAPI``) is inferred from those
examples, not observed: docs/sandbox.md, "Unverified against AWS".
"""

from __future__ import annotations

import re
from functools import cache

import botocore.session


def words(text: str) -> list[str]:
    """The Java v2 generator's word split (``CodegenNamingUtils.splitOnWordBoundaries``)."""
    text = re.sub(r"[^A-Za-z0-9]+", " ", text)  # "acm-pca" -> "acm pca"
    # a standalone v before a number is a version: "SESv2" -> "SES v2"
    text = re.sub(r"([^a-z]{2,})v([0-9]+)", r"\1 v\2 ", text)
    text = re.sub(r"([^A-Z]{2,})V([0-9]+)", r"\1 V\2 ", text)
    text = " ".join(re.split(r"(?<=[a-z])(?=[A-Z][a-zA-Z0-9])", text))  # "DynamoDB" -> "Dynamo DB"
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)  # "ACMSuccess" -> "ACM Success"
    text = re.sub(r"([0-9])([a-zA-Z])", r"\1 \2", text)  # "s3ec2" -> "s3 ec2"
    return re.sub(" +", " ", text).strip().split(" ")


def sdk_service_name(service_id: str) -> str:
    """The Java v2 SDK's name for the service with botocore's ``serviceId`` (``SFN`` -> ``Sfn``)."""
    name = "".join(word[:1].upper() + word[1:].lower() for word in words(service_id))
    name = name.removeprefix("Amazon").removeprefix("Aws")
    return name.removesuffix("Service")


@cache
def error_service_name(service: str) -> str:
    """The ``ServiceName`` of an aws-sdk error for the botocore service ``service``."""
    model = botocore.session.get_session().get_service_model(service)
    return sdk_service_name(model.service_id)


def error_name(service: str, error: str) -> str:
    """``ServiceName.ErrorName`` for botocore's error shape (or code) ``error``."""
    return f"{error_service_name(service)}.{error if error.endswith('Exception') else error + 'Exception'}"


def generic_error_name(service: str) -> str:
    """The name of an error the service model does not list (throttling, 5xx):
    ``SageMaker.SageMakerException``."""
    return error_name(service, error_service_name(service))
