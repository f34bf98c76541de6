"""The report's distinct names: the keys in which settings differ, repeated stems numbered."""

from cscore.metaeval.names import differing, numbered


def test_differing_keys_are_sorted_and_a_missing_key_counts_as_none():
    dicts = [{"b": 1, "a": [1, 2], "c": None}, {"b": 2, "a": [1, 2]}, {"b": 1, "a": [1, 2], "d": {"x": 1}}]
    assert differing(dicts) == ["b", "d"]
    assert differing([{"a": 1}, {"a": 1.0}]) == ["a"]  # written differently: 1 and 1.0
    assert differing([{"a": 1}]) == [] and differing([]) == []


def test_numbered_makes_each_repeat_distinct_in_the_order_found():
    assert numbered(["x", "y", "x", "x", "y"]) == ["x", "y", "x_2", "x_3", "y_2"]
    assert numbered([]) == []
