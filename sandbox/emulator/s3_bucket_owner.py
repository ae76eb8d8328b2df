"""S3's ``ExpectedBucketOwner`` (the ``x-amz-expected-bucket-owner`` header), which moto 5.2.5 ignores.

S3 refuses a request whose bucket is not owned by the account the header names with 403
``AccessDenied`` (S3 user guide, "Verifying bucket ownership with bucket owner condition"). Autopilot
relies on it to refuse a lifecycle bucket of another account (autopilot.caller_resources:
GetBucketLocation); without the seam the sandbox would accept any account's bucket, kinder than AWS.
The seam honours the header on GetBucketLocation and HeadBucket, the calls Autopilot makes with it;
moto's other S3 calls still ignore it (docs/sandbox.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from moto.s3.exceptions import MissingBucket, S3AccessDeniedError
from moto.s3.responses import S3Response

from sandbox.emulator.patching import Patches, expect_signature

HEADER: Final = "x-amz-expected-bucket-owner"
GUARDED: Final = ("get_bucket_location", "head_bucket")
_lock = threading.Lock()
_patches: list[Patches] = []


def _guarded(original: Callable[[S3Response], Any]) -> Callable[[S3Response], Any]:
    def method(self: S3Response) -> Any:
        expected = self.headers.get(HEADER) if self.headers is not None else None
        if expected:
            try:
                bucket = self.backend.get_bucket(self.bucket_name)
            except MissingBucket:
                return original(self)  # S3's own NoSuchBucket / 404
            if str(bucket.account_id) != str(expected):
                raise S3AccessDeniedError()
        return original(self)

    return method


def install() -> None:
    with _lock:
        patches = Patches()
        for name in GUARDED:
            original = expect_signature(S3Response, name, ["self"], "s3 bucket owner", exact=True)
            patches.replace(S3Response, name, _guarded(original))
        _patches.append(patches)


def uninstall() -> None:
    with _lock:
        while _patches:
            _patches.pop().undo()
