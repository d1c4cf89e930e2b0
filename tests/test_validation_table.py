"""One validation, two entry points, XLA's verdicts.

Every row of ``validation_cases.CASES`` goes through
* the HLO parser, as the only element of a tuple (XLA's parser validates
  tuple elements, and only those), and
* ``shape_util.validate_shape_with_optional_layout`` of the text parsed on
  its own (which always parses, as in XLA),
and both must give the row's message, word for word. Whether XLA's own parser
accepts each row (alone and inside a tuple) was recorded by
``tests/oracle/gen_validation.py`` in ``tests/data/xla_validation.json``.
"""

import json
import pathlib

import pytest

from xlashape import HloParseError, InvalidShapeError, parse_shape
from xlashape import layout_util as lu
from xlashape import shape_util as su

from validation_cases import CASES

XLA = json.loads((pathlib.Path(__file__).parent / "data" / "xla_validation.json").read_text())


@pytest.mark.parametrize("text, message", CASES, ids=[c[0] for c in CASES])
def test_parser_and_shape_util_say_the_same(text, message):
    shape = parse_shape(text)  # never validated on its own
    in_tuple = "(" + text + ")"
    if message is None:
        su.validate_shape_with_optional_layout(shape)
        assert parse_shape(in_tuple).tuple_shapes == (shape,)
        return
    with pytest.raises(InvalidShapeError) as info:
        su.validate_shape_with_optional_layout(shape)
    assert str(info.value) == message
    with pytest.raises(HloParseError) as info:
        parse_shape(in_tuple)
    assert info.value.message == "tuple element 0 is not a valid shape: " + message
    assert (info.value.line, info.value.column) == (1, 2)


@pytest.mark.parametrize("text, message", CASES, ids=[c[0] for c in CASES])
def test_xla_gives_the_same_verdict(text, message):
    verdict = XLA["cases"][text]
    assert verdict["alone"] == "OK"
    assert verdict["in_tuple"] == ("OK" if message is None else "ERR")


@pytest.mark.parametrize("text, message",
                         [c for c in CASES if c[1] is not None and "Shape" not in c[1]],
                         ids=[c[0] for c in CASES if c[1] is not None and "Shape" not in c[1]])
def test_layout_checks_through_layout_util(text, message):
    # The layout checks are LayoutUtil's: the same messages from
    # validate_layout_in_shape and (for a single array) validate_layout_for_shape.
    shape = parse_shape(text)
    with pytest.raises(InvalidShapeError) as info:
        lu.validate_layout_in_shape(shape, allow_missing_layouts=True)
    assert str(info.value) == message
    if shape.is_array:
        with pytest.raises(InvalidShapeError) as info:
            lu.validate_layout_for_shape(shape.layout, shape)
        assert str(info.value) == message


def test_the_fixture_covers_the_table():
    assert set(XLA["cases"]) == {text for text, _ in CASES}
    assert XLA["jaxlib"]
