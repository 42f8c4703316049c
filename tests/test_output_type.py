"""turnlog.output: an output_type's schema (wrapped, made strict where it can
be) and its validator (errors naming the field), for each kind of type."""

from __future__ import annotations

import dataclasses
import typing

import msgspec
import pydantic
import pytest

from turnlog import InvalidInputError, OutputType, OutputValidationError


class Part(pydantic.BaseModel):
    sku: str
    price: float


class Order(pydantic.BaseModel):
    part: Part = pydantic.Field(description="what was ordered")
    count: int = 1


class Node(pydantic.BaseModel):
    kids: list[Node] = pydantic.Field(default=[], description="children")


class Plain(typing.TypedDict):  # typing's, which pydantic refuses before 3.12
    name: str


class Ticket(msgspec.Struct):
    title: str
    priority: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


def test_an_object_type_is_asked_for_as_is_and_strict() -> None:
    schema = OutputType(Order).schema
    assert schema.name == "Order"
    assert schema.strict
    assert schema.schema["required"] == ["part", "count"]
    # a described $ref is unravelled: strict mode takes a $ref only alone
    part = schema.schema["properties"]["part"]
    assert "$ref" not in part
    assert part["description"] == "what was ordered"
    assert part["additionalProperties"] is False


@pytest.mark.parametrize(
    ("annotation", "name"),
    [(list[Part], "list_of_Part"), (Part | Point, "Part_or_Point"), (int, "int")],
)
def test_other_types_are_wrapped_in_an_object(annotation: object, name: str) -> None:
    output = OutputType(annotation)
    assert output.schema.name == name
    assert output.schema.schema["required"] == ["response"]
    assert output.schema.schema["type"] == "object"


def test_wrapped_answers_are_unwrapped_and_bare_ones_taken_too() -> None:
    output = OutputType(list[int])
    assert output.check('{"response": [1, 2]}') == ([1, 2], [1, 2])
    assert output.check("[3]") == ([3], [3])


def test_a_msgspec_struct_and_a_typing_typeddict_are_validated_by_msgspec() -> None:
    ticket = OutputType(Ticket)
    assert ticket.schema.schema["type"] == "object"  # the root $ref is inlined
    assert ticket.check('{"title": "t", "priority": 1}')[0] == Ticket("t", 1)
    with pytest.raises(OutputValidationError) as raised:
        ticket.check('{"title": "t", "priority": "high"}')
    assert str(raised.value) == "answer.priority: Expected `int`, got `str`"
    assert OutputType(Plain).check('{"name": "x"}') == ({"name": "x"}, {"name": "x"})


def test_errors_name_the_field_and_count_the_rest() -> None:
    output = OutputType(list[Part])
    bad = '{"response": [{"sku": 1}, {}, {}, {}]}'
    with pytest.raises(OutputValidationError) as raised:
        output.check(bad)
    message = str(raised.value)
    assert message.startswith("answer[0].sku: Input should be a valid string; ")
    assert message.endswith("answer[2].sku: Field required (and 3 more)")


def test_a_fenced_answer_is_read_and_non_json_is_named() -> None:
    output = OutputType(Point)
    assert output.check('```json\n{"x": 1, "y": 2}\n```')[0] == Point(1.0, 2.0)
    with pytest.raises(OutputValidationError, match=r"^answer: not valid JSON"):
        output.check("The point is (1, 2).")


def test_a_recursive_type_validates_and_an_open_dict_is_not_strict() -> None:
    node = OutputType(Node)
    assert node.check('{"kids": [{"kids": []}]}')[0] == Node(kids=[Node()])
    assert not OutputType(dict[str, int]).schema.strict


def test_load_rebuilds_the_typed_object_from_recorded_json() -> None:
    output = OutputType(Order)
    typed, recorded = output.check('{"part": {"sku": "a", "price": 2}}')
    assert recorded == {"part": {"sku": "a", "price": 2.0}, "count": 1}
    assert output.load(recorded) == typed
    with pytest.raises(OutputValidationError):
        output.load({"part": None})


def test_a_type_with_no_schema_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="has no JSON schema"):
        OutputType(typing.Callable[[], int])
