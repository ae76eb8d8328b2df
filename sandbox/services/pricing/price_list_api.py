"""AWS Price List Query API simulator: ``pricing:GetProducts`` for AmazonSageMaker from
sandbox/services/pricing/list_prices.py.

moto 5.2.5 has no ``pricing`` service: its ``BotocoreStubber`` answers any amazonaws.com URL it has
no backend for with ``404 Not yet implemented``. :func:`_patch_stubber` (the one seam) makes
``BotocoreStubber.process_request`` hand Price List requests (``api.pricing.<region>.amazonaws.com``)
to the installed :class:`PricingSimulator`; the ``intercept_aws_calls`` seam runs before it, so a
function's call is authorized against its role (``pricing:GetProducts`` on ``*``) and AWS call faults
hit it as they hit every other service. ``sandbox up`` serves the same answers over HTTP
(:meth:`PricingSimulator.wsgi_answer`, for requests signed for the ``pricing`` service).

Where AWS serves it: the Price List Query API has endpoints in us-east-1, ap-south-1 and
eu-central-1 only (:data:`PRICE_LIST_REGIONS`). botocore builds ``api.pricing.<region>.amazonaws.com``
for any region, and for the others that name does not resolve: the client fails with
``EndpointConnectionError`` (after its retries), and so does an in-process client here.

What is served: per region (every ``regionCode``; the figures of sandbox/services/pricing/list_prices.py in
each) and instance type, one HyperPod product (usage type ``<region prefix>-Cluster:<type>``, the price the
Budgets simulator charges) and one Training product at another price. The Training product is not
an AWS figure: it is there because AWS lists several SageMaker products per instance type, so a
client that takes the first product instead of the HyperPod one gets a visibly wrong rate. Each
``PriceList`` entry is a JSON *string* (botocore does not decode it), shaped as AWS's documented
example: ``product`` (``productFamily``, ``attributes``, ``sku``), ``serviceCode``, ``terms.OnDemand``
(``priceDimensions`` with ``unit: "Hrs"`` and ``pricePerUnit.USD``), ``version``, ``publicationDate``.

Chosen where AWS documents nothing public (unverified): the SageMaker attribute names beyond
``instanceName`` / ``regionCode`` / ``usagetype`` / ``location`` (``instanceType``, ``component``,
``operation``), the usage-type region prefixes of :data:`USAGE_PREFIXES` (Cost and Usage Report
spellings; others fall back to the region code in capitals), ``ANY_OF`` / ``NONE_OF`` values as a
comma-separated list, an unknown ServiceCode answering ``NotFoundException``, and the messages of
the errors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final
from urllib.parse import urlparse

from botocore.exceptions import EndpointConnectionError
from botocore.loaders import Loader
from moto.core.botocore_stubber import BotocoreStubber

from sandbox.emulator.patching import expect_signature
from sandbox.services.pricing.list_prices import DEFAULT_PRICES

PRICE_LIST_REGIONS: Final = ("us-east-1", "ap-south-1", "eu-central-1")
"""Where AWS serves the Price List Query API (Billing user guide, "Using the Price List Query API")."""

SERVICE_CODE: Final = "AmazonSageMaker"
FORMAT_VERSION: Final = "aws_v1"
FILTER_TYPES: Final = ("TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF")
MAX_RESULTS_RANGE: Final = (1, 100)
HYPERPOD_COMPONENT: Final = "Cluster"
TRAINING_COMPONENT: Final = "Training"
# Not an AWS figure: makes the Training product differ from the HyperPod one (see the module doc).
TRAINING_PRICE_FACTOR: Final = Decimal("1.15")
# The OnDemand offer term code and rate code suffix every AWS price list uses.
ON_DEMAND_TERM: Final = "JRTCKXETXF"
RATE_CODE: Final = "6YS6EN2CT7"
PUBLICATION_DATE: Final = "2025-11-01T00:00:00Z"
USAGE_PREFIXES: Final = {
    "us-east-1": "USE1",
    "us-east-2": "USE2",
    "us-west-1": "USW1",
    "us-west-2": "USW2",
    "eu-west-1": "EU",
    "eu-west-2": "EUW2",
    "eu-central-1": "EUC1",
    "eu-north-1": "EUN1",
    "ap-south-1": "APS3",
    "ap-northeast-1": "APN1",
    "ap-southeast-1": "APS1",
    "ap-southeast-2": "APS2",
}
_JSON_HEADERS: Final = {"Content-Type": "application/x-amz-json-1.1"}
_TARGET_PREFIX: Final = "AWSPriceListService."


class PricingError(Exception):
    """A Price List API error answer (code, HTTP status, message)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def _region_names() -> dict[str, str]:
    """Region code -> the Price List's ``location`` ("US East (N. Virginia)"), from botocore's endpoints."""
    endpoints = Loader().load_data("endpoints")
    return {
        code: str(region["description"])
        for partition in endpoints["partitions"]
        for code, region in partition["regions"].items()
    }


def usage_type(region: str, instance_type: str) -> str:
    """HyperPod's usage type: ``<region prefix>-Cluster:ml.<type>`` (docs AWS-FACTS, Cost tracking)."""
    return f"{USAGE_PREFIXES.get(region, region.upper())}-{HYPERPOD_COMPONENT}:{instance_type}"


def _sku(*parts: str) -> str:
    digest = base64.b32encode(hashlib.sha256("|".join(parts).encode()).digest()).decode()
    return digest[:16]


class PricingSimulator:
    """The Price List Query API of the sandbox (one for every account and caller: list prices are public)."""

    def __init__(self, prices: Mapping[str, Decimal] = DEFAULT_PRICES) -> None:
        self.prices = prices
        self._locations = _region_names()
        self.calls = 0  # GetProducts answered (a cached client asks rarely: tests read this)
        self._lock = threading.Lock()
        self._catalog: list[dict[str, Any]] | None = None  # every region's products, built once

    # -- lifecycle -------------------------------------------------------------------------------
    def install(self) -> None:
        """Answer Price List requests made in-process under ``mock_aws`` (one simulator at a time)."""
        with _REGISTRY_LOCK:
            if _INSTALLED and _INSTALLED[0] is not self:
                raise RuntimeError("another PricingSimulator is installed")
            if not _INSTALLED:
                _INSTALLED.append(self)
                _patch_stubber()

    def uninstall(self) -> None:
        with _REGISTRY_LOCK:
            if self in _INSTALLED:
                _INSTALLED.remove(self)
                _unpatch_stubber()

    # -- the API ---------------------------------------------------------------------------------
    def products(self, region: str) -> list[dict[str, Any]]:
        """Every product of the region, as the Price List holds them (before JSON encoding)."""
        found = []
        for instance_type, price in sorted(self.prices.items()):
            found.append(self._product(region, instance_type, HYPERPOD_COMPONENT, price))
            training = (price * TRAINING_PRICE_FACTOR).quantize(Decimal("0.01"))
            found.append(self._product(region, instance_type, TRAINING_COMPONENT, training))
        return found

    def get_products(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """GetProducts: the products of ServiceCode matching every filter, a page at a time."""
        service_code = params.get("ServiceCode")
        if not service_code:
            raise PricingError("InvalidParameterException", "ServiceCode is required.")
        if service_code != SERVICE_CODE:
            raise PricingError(
                "NotFoundException",
                f"Service code {service_code} is not served by the sandbox's Price List "
                f"(only {SERVICE_CODE}).",
            )
        version = params.get("FormatVersion") or FORMAT_VERSION
        if version != FORMAT_VERSION:
            raise PricingError("InvalidParameterException", f"Invalid FormatVersion: {version}.")
        max_results = int(params.get("MaxResults") or MAX_RESULTS_RANGE[1])
        low, high = MAX_RESULTS_RANGE
        if not low <= max_results <= high:
            raise PricingError("InvalidParameterException", f"MaxResults must be between {low} and {high}.")
        matches = [_matcher(f) for f in params.get("Filters") or []]
        selected = [product for product in self._every_product() if all(match(product) for match in matches)]
        query = _query_hash(params)
        token = params.get("NextToken")
        start = _decode_token(str(token), query) if token else 0
        page = selected[start : start + max_results]
        answer: dict[str, Any] = {
            "FormatVersion": version,
            "PriceList": [json.dumps(product, separators=(",", ":")) for product in page],
        }
        if start + max_results < len(selected):
            answer["NextToken"] = _encode_token(start + max_results, query)
        with self._lock:
            self.calls += 1
        return answer

    def answer(self, operation: str, body: bytes) -> tuple[int, dict[str, str], str]:
        """The HTTP answer (status, headers, JSON body) to a Price List request."""
        try:
            if operation != "GetProducts":
                raise PricingError(
                    "UnknownOperationException",
                    f"{operation} is not simulated by the sandbox "
                    "(sandbox/services/pricing/price_list_api.py serves GetProducts)",
                )
            params = json.loads(body or b"{}")
            return 200, dict(_JSON_HEADERS), json.dumps(self.get_products(params))
        except PricingError as error:
            payload = {"__type": error.code, "Message": error.message}
            return error.status, dict(_JSON_HEADERS), json.dumps(payload)

    def wsgi_answer(self, environ: Mapping[str, Any]) -> tuple[int, dict[str, str], str] | None:
        """The answer to an HTTP request to ``sandbox up``'s AWS endpoint, None if not a Price List one.

        The region comes from the SigV4 credential scope; outside :data:`PRICE_LIST_REGIONS` the
        request gets a 404 (on AWS such a client never connects: see the module doc)."""
        scope = _credential_scope(str(environ.get("HTTP_AUTHORIZATION", "")))
        if scope is None or scope[1] != "pricing":
            return None
        region = scope[0]
        if region not in PRICE_LIST_REGIONS:
            message = f"the Price List API has no endpoint in {region} (api.pricing.{region}.amazonaws.com)"
            return 404, dict(_JSON_HEADERS), json.dumps({"__type": "NotFound", "Message": message})
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        return self.answer(target.removeprefix(_TARGET_PREFIX), body)

    # -- internals -------------------------------------------------------------------------------
    def _every_product(self) -> list[dict[str, Any]]:
        with self._lock:
            if self._catalog is None:
                self._catalog = [p for region in sorted(self._locations) for p in self.products(region)]
            return self._catalog

    def _product(self, region: str, instance_type: str, component: str, price: Decimal) -> dict[str, Any]:
        prefix = USAGE_PREFIXES.get(region, region.upper())
        usage = f"{prefix}-{component}:{instance_type}"
        sku = _sku(region, usage)
        term = f"{sku}.{ON_DEMAND_TERM}"
        rate = f"{term}.{RATE_CODE}"
        what = "HyperPod cluster" if component == HYPERPOD_COMPONENT else "training"
        location = self._locations.get(region, region)
        description = f"${price} per Hour for {instance_type} {what} usage in {location}"
        return {
            "product": {
                "productFamily": "ML Instance",
                "attributes": {
                    "servicecode": SERVICE_CODE,
                    "servicename": "Amazon SageMaker",
                    "location": location,
                    "locationType": "AWS Region",
                    "regionCode": region,
                    "usagetype": usage,
                    "operation": "RunInstance",
                    "component": component,
                    "instanceName": instance_type,
                    "instanceType": instance_type,
                },
                "sku": sku,
            },
            "serviceCode": SERVICE_CODE,
            "terms": {
                "OnDemand": {
                    term: {
                        "priceDimensions": {
                            rate: {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": description,
                                "appliesTo": [],
                                "rateCode": rate,
                                "beginRange": "0",
                                "pricePerUnit": {"USD": f"{price:.10f}"},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": PUBLICATION_DATE,
                        "offerTermCode": ON_DEMAND_TERM,
                        "termAttributes": {},
                    }
                }
            },
            "version": PUBLICATION_DATE.replace("-", "").replace(":", "").replace("T", "").rstrip("Z"),
            "publicationDate": PUBLICATION_DATE,
        }


def _field_value(product: Mapping[str, Any], field: str) -> str | None:
    if field.lower() == "servicecode":
        return str(product["serviceCode"])
    if field == "productFamily":
        return str(product["product"]["productFamily"])
    value = product["product"]["attributes"].get(field)
    return None if value is None else str(value)


def _matcher(spec: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    kind, field, value = spec.get("Type"), spec.get("Field"), spec.get("Value")
    if kind not in FILTER_TYPES:
        raise PricingError(
            "InvalidParameterException",
            f"Invalid filter Type {kind}: must be one of {', '.join(FILTER_TYPES)}.",
        )
    if not field or value is None:
        raise PricingError("InvalidParameterException", "Every filter needs a Field and a Value.")
    wanted = str(value)
    listed = [v.strip() for v in wanted.split(",")]

    def match(product: Mapping[str, Any]) -> bool:
        actual = _field_value(product, str(field))
        if kind in ("TERM_MATCH", "EQUALS"):
            return actual == wanted
        if kind == "CONTAINS":
            return actual is not None and wanted in actual
        if kind == "ANY_OF":
            return actual in listed
        return actual not in listed  # NONE_OF

    return match


def _query_hash(params: Mapping[str, Any]) -> str:
    query = {k: params.get(k) for k in ("ServiceCode", "Filters", "FormatVersion")}
    return hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:16]


def _encode_token(offset: int, query: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "q": query}).encode()).decode()


def _decode_token(token: str, query: str) -> int:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        offset = decoded["o"]
        if decoded["q"] != query or not isinstance(offset, int) or offset < 0:
            raise ValueError(token)
    except (ValueError, KeyError, TypeError):
        raise PricingError("InvalidNextTokenException", "The next token is invalid.") from None
    return offset


def _credential_scope(authorization: str) -> tuple[str, str] | None:
    """(region, service) of a SigV4 Authorization header."""
    marker = "Credential="
    if marker not in authorization:
        return None
    scope = authorization.split(marker, 1)[1].split(",", 1)[0].split("/")
    return (scope[2], scope[3]) if len(scope) >= 5 else None


def price_list_region(url: str) -> str | None:
    """The region of a Price List endpoint URL (``api.pricing.<region>.amazonaws.com``), else None."""
    host = urlparse(url).hostname or ""
    parts = host.split(".")
    if len(parts) >= 5 and parts[:2] == ["api", "pricing"] and host.endswith(".amazonaws.com"):
        return parts[2]
    return None


# -- the moto seam -------------------------------------------------------------------------------
_INSTALLED: list[PricingSimulator] = []
_REGISTRY_LOCK = threading.Lock()
_original_process_request: list[Callable[..., Any]] = []


def _answer_in_process(request: Any) -> tuple[int, dict[str, str], str] | None:
    region = price_list_region(str(request.url))
    if region is None or not _INSTALLED:
        return None
    if region not in PRICE_LIST_REGIONS:
        # AWS has no such endpoint: the name does not resolve, and botocore reports exactly this.
        raise EndpointConnectionError(endpoint_url=f"https://api.pricing.{region}.amazonaws.com/")
    target = request.headers.get("X-Amz-Target", b"")
    target = target.decode() if isinstance(target, bytes) else str(target)
    body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
    return _INSTALLED[0].answer(target.removeprefix(_TARGET_PREFIX), body)


def _patch_stubber() -> None:
    """THE seam: ``BotocoreStubber.process_request(self, request)`` returns (status, headers, body)
    for the URLs moto serves and 404 "Not yet implemented" for other amazonaws.com ones; Price List
    URLs are answered here first. Guarded by tests/sandbox/test_pricing.py."""
    original = expect_signature(
        BotocoreStubber, "process_request", ["self", "request"], "pricing", exact=True
    )

    def process_request(self: BotocoreStubber, request: Any) -> Any:
        answered = _answer_in_process(request)
        return answered if answered is not None else original(self, request)

    _original_process_request.append(original)
    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]


def _unpatch_stubber() -> None:
    if _original_process_request:
        BotocoreStubber.process_request = _original_process_request.pop()  # type: ignore[method-assign]


__all__ = [
    "PRICE_LIST_REGIONS",
    "SERVICE_CODE",
    "PricingError",
    "PricingSimulator",
    "price_list_region",
    "usage_type",
]
