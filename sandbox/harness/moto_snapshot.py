"""A copy of one account's moto state, put back into a fresh ``mock_aws``: deploy once, start each test
from what the deploy left, as moto's own suite resets its backends between tests.

A deploy of template.yaml is ~240 AWS calls (about a second); copying what they made is milliseconds.
Everything the account holds in every service moto loaded is copied in one ``deepcopy`` (objects two
services share stay shared), and restoring copies it again, so no test sees another's changes. What
cannot be deep-copied as it is gets a faithful copy: a lock, condition or event is a new one (an SQS
queue holds a condition), an RSA key is reloaded from its DER bytes (KMS keys). Anything else that
cannot be copied fails loudly.
"""

from __future__ import annotations

import copy
import copyreg
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from moto.core.base_backend import AccountSpecificBackend, BackendDict, backend_lock


def _reload_rsa_key(der: bytes) -> Any:
    return serialization.load_der_private_key(der, password=None)


def _rsa_key_reducer(key: rsa.RSAPrivateKey) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
    der = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return _reload_rsa_key, (der,)


def _event(is_set: bool) -> threading.Event:
    event = threading.Event()
    if is_set:
        event.set()
    return event


# a lock's type cannot be called (_thread.lock): each type with the factory that makes one
_LOCKS = ((type(threading.Lock()), threading.Lock), (type(threading.RLock()), threading.RLock))
# the Rust class; only its type is wanted, so the smallest key is made (never used to sign anything)
_RSA_KEY_TYPE = type(rsa.generate_private_key(public_exponent=65537, key_size=1024))  # noqa: S505


def _backend_dicts() -> list[BackendDict[Any]]:
    """Every BackendDict moto made (the list ``mock_aws`` resets at its end)."""
    # moto's class-level registry; a generic class's attribute, which mypy calls ambiguous
    instances: list[BackendDict[Any]] = BackendDict._instances  # type: ignore[misc]
    return instances


@contextmanager
def _copyable() -> Iterator[None]:
    """Teach deepcopy the types above for the length of one copy (copyreg is process-wide)."""
    reducers: dict[type, Any] = {
        _RSA_KEY_TYPE: _rsa_key_reducer,
        # a Condition keeps its lock's bound methods, which deepcopy would share with the original
        threading.Condition: lambda condition: (threading.Condition, (condition._lock,)),
        threading.Event: lambda event: (_event, (event.is_set(),)),
    }
    for lock_type, factory in _LOCKS:
        reducers[lock_type] = lambda _lock, new=factory: (new, ())
    added = [kind for kind in reducers if kind not in copyreg.dispatch_table]
    for kind in added:
        copyreg.dispatch_table[kind] = reducers[kind]
    try:
        yield
    finally:
        for kind in added:
            copyreg.dispatch_table.pop(kind, None)


@dataclass(frozen=True)
class AccountSnapshot:
    """One account's state in every moto service that holds some, with anything that goes with it
    (``extra``: the deployed Stack object, copied with the backends)."""

    account_id: str
    services: tuple[BackendDict[Any], ...]
    saved: tuple[tuple[AccountSpecificBackend[Any], ...], Any]

    @classmethod
    def take(cls, account_id: str, extra: Any = None) -> AccountSnapshot:
        with backend_lock:
            services = tuple(bd for bd in _backend_dicts() if account_id in dict.keys(bd))
            state = tuple(dict.__getitem__(bd, account_id) for bd in services)
        with _copyable():
            saved = copy.deepcopy((state, extra))
        return cls(account_id, services, saved)

    def restore(self) -> Any:
        """Put a copy of the state into the running mock (call right after ``mock_aws`` started, which
        emptied every backend); the copy of ``extra``."""
        with _copyable():
            state, extra = copy.deepcopy(self.saved)
        with backend_lock:
            for service, account in zip(self.services, state, strict=True):
                dict.__setitem__(service, self.account_id, account)
                if service not in _backend_dicts():
                    _backend_dicts().append(service)  # so that the mock's end resets it
        return extra
