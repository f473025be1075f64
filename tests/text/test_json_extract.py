"""Finding JSON in model output: fences, prose, cut-off arrays."""

from memjax.text.json_extract import first_object, salvage_array_items


def test_first_object():
    assert first_object('x {"a": 1} y {"b": 2}', required_key="b") == {"b": 2}
    assert first_object('```json\n{"a": {"b": 1}}\n```') == {"a": {"b": 1}}
    assert first_object('```JSON\n{"a": 1}') == {"a": 1}  # fence never closed
    assert first_object("{not json}") is None
    assert first_object("[1, 2]") is None


def test_salvage_array_items():
    assert salvage_array_items('{"memory": [{"a": 1}, {"b": 2}]}', "memory") == (
        [{"a": 1}, {"b": 2}],
        True,
    )
    assert salvage_array_items('{"memory": [{"a": 1}, {"b": ', "memory") == ([{"a": 1}], False)
    assert salvage_array_items('```\n{"facts": ["x", "y', "facts") == (["x"], False)
    assert salvage_array_items('{"other": []}', "memory") is None
