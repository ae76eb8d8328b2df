"""CloudFormation intrinsic functions and pseudo parameters, evaluated the way CloudFormation does.

Supported: Ref, Fn::Sub (string and [string, map] forms), Fn::GetAtt (list and dotted string),
Fn::If, Fn::Equals, Fn::Not, Fn::And, Fn::Or, Fn::Join, Fn::Select, Fn::Split, Condition (inside
conditions), and the pseudo parameters AWS::Region, AWS::AccountId, AWS::Partition, AWS::StackName,
AWS::StackId, AWS::NoValue, AWS::URLSuffix. Anything else is a loud ``TemplateError`` that names the
logical id being resolved: the sandbox never silently skips what it cannot evaluate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from .stack import TemplateError


class _NoValue:
    """AWS::NoValue: removes the property (or list item) it stands for."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE: Final = _NoValue()
_FUNCTIONS: Final = ("Sub", "GetAtt", "If", "Equals", "Not", "And", "Or", "Join", "Select", "Split")
INTRINSICS: Final = frozenset({"Ref", "Condition", *(f"Fn::{name}" for name in _FUNCTIONS)})
_SUB_VARIABLE = re.compile(r"\$\{([^!}][^}]*)\}")


def partition_for(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def url_suffix_for(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


RefLookup = Callable[[str], Any]
"""Ref of a resource logical id -> its Ref value (raises TemplateError when unknown)."""
AttLookup = Callable[[str, str], Any]
"""(logical id, attribute) -> value (raises TemplateError when unknown)."""


class Resolver:
    """Evaluates intrinsics against parameters, conditions and the resources deployed so far."""

    def __init__(
        self,
        *,
        region: str,
        account_id: str,
        stack_name: str,
        parameters: Mapping[str, Any],
        condition_definitions: Mapping[str, Any],
        ref: RefLookup,
        get_att: AttLookup,
    ) -> None:
        self.region = region
        self.account_id = account_id
        self.stack_name = stack_name
        self.parameters = dict(parameters)
        self._condition_definitions = dict(condition_definitions)
        self._conditions: dict[str, bool] = {}
        self._ref = ref
        self._get_att = get_att

    # pseudo parameters -------------------------------------------------------------------------
    def pseudo(self, name: str) -> Any:
        values: dict[str, Any] = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::Partition": partition_for(self.region),
            "AWS::StackName": self.stack_name,
            "AWS::StackId": (
                f"arn:{partition_for(self.region)}:cloudformation:{self.region}:{self.account_id}"
                f":stack/{self.stack_name}/00000000-0000-0000-0000-000000000000"
            ),
            "AWS::URLSuffix": url_suffix_for(self.region),
            "AWS::NoValue": NO_VALUE,
            "AWS::NotificationARNs": [],
        }
        if name not in values:
            raise TemplateError(f"unknown pseudo parameter {name}")
        return values[name]

    # conditions --------------------------------------------------------------------------------
    def condition(self, name: str, *, where: str = "Conditions") -> bool:
        if name in self._conditions:
            return self._conditions[name]
        if name not in self._condition_definitions:
            raise TemplateError(f"{where}: unknown condition {name!r}")
        self._conditions[name] = False  # guards against a cycle while evaluating
        value = self.resolve(self._condition_definitions[name], where=f"Conditions.{name}")
        if not isinstance(value, bool):
            raise TemplateError(f"Conditions.{name}: evaluates to {value!r}, not a boolean")
        self._conditions[name] = value
        return value

    # values ------------------------------------------------------------------------------------
    def resolve(self, value: Any, *, where: str) -> Any:
        """Resolve every intrinsic in ``value``; AWS::NoValue removes keys and list items."""
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key in INTRINSICS:
                    return self._intrinsic(key, arg, where)
                if key.startswith("Fn::"):  # Fn::FindInMap, Fn::ImportValue, Fn::Base64…
                    raise TemplateError(f"{where}: intrinsic {key} is not supported by the sandbox")
            out: dict[str, Any] = {}
            for key, item in value.items():
                resolved = self.resolve(item, where=f"{where}.{key}")
                if resolved is not NO_VALUE:
                    out[key] = resolved
            return out
        if isinstance(value, list):
            items = [self.resolve(item, where=f"{where}[{i}]") for i, item in enumerate(value)]
            return [item for item in items if item is not NO_VALUE]
        return value

    def _intrinsic(self, name: str, arg: Any, where: str) -> Any:
        here = f"{where}: {name}"
        if name == "Ref":
            return self.ref(self._expect_str(arg, here), where=where)
        if name == "Fn::GetAtt":
            if isinstance(arg, str):
                logical_id, _, attribute = arg.partition(".")
            elif isinstance(arg, list) and len(arg) == 2:
                logical_id, attribute = self._expect_str(arg[0], here), self.resolve(arg[1], where=here)
            else:
                raise TemplateError(f"{here} needs [LogicalId, Attribute], got {arg!r}")
            if not logical_id or not attribute:
                raise TemplateError(f"{here} needs LogicalId.Attribute, got {arg!r}")
            return self._get_att(logical_id, str(attribute))
        if name == "Fn::Sub":
            return self._sub(arg, here)
        if name == "Fn::If":
            if not isinstance(arg, list) or len(arg) != 3:
                raise TemplateError(f"{here} needs [Condition, IfTrue, IfFalse], got {arg!r}")
            branch = arg[1] if self.condition(self._expect_str(arg[0], here), where=here) else arg[2]
            return self.resolve(branch, where=where)
        if name == "Condition":
            return self.condition(self._expect_str(arg, here), where=here)
        if name == "Fn::Equals":
            left, right = self._args(arg, 2, here)
            return _as_comparable(left) == _as_comparable(right)
        if name == "Fn::Not":
            (inner,) = self._args(arg, 1, here)
            return not self._expect_bool(inner, here)
        if name in ("Fn::And", "Fn::Or"):
            if not isinstance(arg, list) or not 2 <= len(arg) <= 10:
                raise TemplateError(f"{here} needs 2 to 10 conditions, got {arg!r}")
            values = [self._expect_bool(self.resolve(item, where=here), here) for item in arg]
            return all(values) if name == "Fn::And" else any(values)
        if name == "Fn::Join":
            delimiter, items = self._args(arg, 2, here)
            if not isinstance(items, list):
                raise TemplateError(f"{here} needs a list to join, got {items!r}")
            return str(delimiter).join(_as_str(item, here) for item in items)
        if name == "Fn::Select":
            index, items = self._args(arg, 2, here)
            if not isinstance(items, list):
                raise TemplateError(f"{here} needs a list, got {items!r}")
            try:
                return items[int(index)]
            except (IndexError, ValueError) as error:
                raise TemplateError(f"{here}: index {index!r} out of range for {items!r}") from error
        if name == "Fn::Split":
            delimiter, source = self._args(arg, 2, here)
            return _as_str(source, here).split(str(delimiter))
        raise TemplateError(f"{here} is not supported")  # pragma: no cover - INTRINSICS is exhaustive

    def ref(self, name: str, *, where: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name in self.parameters:
            return self.parameters[name]
        return self._ref(name)

    def _sub(self, arg: Any, where: str) -> str:
        if isinstance(arg, str):
            template, variables = arg, {}
        elif isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str):
            template = arg[0]
            variables = self.resolve(arg[1], where=where)
            if not isinstance(variables, dict):
                raise TemplateError(f"{where} variables must be a map, got {variables!r}")
        else:
            raise TemplateError(f"{where} needs a string or [string, map], got {arg!r}")

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return _as_str(variables[name], where)
            if "." in name and not name.startswith("AWS::"):
                logical_id, _, attribute = name.partition(".")
                return _as_str(self._get_att(logical_id, attribute), where)
            return _as_str(self.ref(name, where=where), where)

        # ${!Literal} is written out as ${Literal}
        return _SUB_VARIABLE.sub(replace, template).replace("${!", "${")

    def _args(self, arg: Any, count: int, where: str) -> list[Any]:
        if not isinstance(arg, list) or len(arg) != count:
            raise TemplateError(f"{where} needs {count} arguments, got {arg!r}")
        return [self.resolve(item, where=where) for item in arg]

    @staticmethod
    def _expect_str(value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise TemplateError(f"{where} needs a string, got {value!r}")
        return value

    @staticmethod
    def _expect_bool(value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise TemplateError(f"{where} needs a condition (boolean), got {value!r}")
        return value


def _as_comparable(value: Any) -> Any:
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _as_str(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TemplateError(f"{where}: cannot use {value!r} inside a string")
