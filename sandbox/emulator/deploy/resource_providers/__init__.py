"""One module per CloudFormation resource type (LocalStack's layout): ``aws_<service>_<type>.py``, each
with a ``PROVIDER``. A type without a module here is refused by the deployer."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Final

from ..context import Provider

PROVIDERS: Final[dict[str, Provider]] = {
    provider.type: provider
    for provider in (
        importlib.import_module(f"{__name__}.{module.name}").PROVIDER
        for module in pkgutil.iter_modules(__path__)
    )
}
