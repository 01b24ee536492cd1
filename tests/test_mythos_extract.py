"""Extraction of JSON objects, python blocks and scene classes from raw model text."""

from __future__ import annotations

import pytest

from mythloop.mythos.code.extract import (
    ExtractionError,
    extract_json_object,
    extract_python_block,
    find_scene_class,
)


def test_bare_object():
    assert extract_json_object('{"a": 1, "b": [1, 2]}') == {"a": 1, "b": [1, 2]}


def test_fenced_object_with_prose_around():
    text = 'Sure! Here is the artifact:\n```json\n{"core_claim": "x", "n": 2}\n```\nHope it helps.'
    assert extract_json_object(text) == {"core_claim": "x", "n": 2}


def test_unfenced_object_inside_prose():
    text = 'The map follows. {"spine": ["a", "b"], "target": "t"} That is all.'
    assert extract_json_object(text) == {"spine": ["a", "b"], "target": "t"}


def test_nested_braces_inside_strings_do_not_cut_the_object():
    text = 'prefix {"latex": "\\\\frac{a}{b} } {", "inner": {"deep": {"x": "}"}}} suffix {"second": 1}'
    obj = extract_json_object(text)
    assert obj == {"latex": "\\frac{a}{b} } {", "inner": {"deep": {"x": "}"}}}


def test_first_complete_object_wins_and_invalid_braces_are_skipped():
    text = 'Sets look like {1, 2}. Answer: {"id": "first"} and then {"id": "second"}'
    assert extract_json_object(text) == {"id": "first"}


def test_unescaped_latex_backslashes_are_recovered():
    # A model writing LaTeX straight into JSON: \f, \t, \n, \b would otherwise turn into control characters.
    text = '{"parts": ["\\frac{\\partial u}{\\partial t}", "\\theta", "\\nabla^2 u", "\\beta", "\\underbrace{x}"]}'
    obj = extract_json_object(text)
    assert obj["parts"] == [r"\frac{\partial u}{\partial t}", r"\theta", r"\nabla^2 u", r"\beta", r"\underbrace{x}"]


def test_python_raw_string_prefixes_are_tolerated():
    text = '{"latex_parts": [r"\\frac{a}{b}", R"\\alpha", "plain"], "word": "rr"}'
    obj = extract_json_object(text)
    assert obj == {"latex_parts": [r"\frac{a}{b}", r"\alpha", "plain"], "word": "rr"}


def test_valid_json_escapes_are_kept():
    obj = extract_json_object('{"text": "line one\\nline two", "quote": "say \\"hi\\"", "tex": "\\\\pi"}')
    assert obj == {"text": "line one\nline two", "quote": 'say "hi"', "tex": "\\pi"}


def test_trailing_commas_are_forgiven():
    assert extract_json_object('{"a": [1, 2,], "b": 3,}') == {"a": [1, 2], "b": 3}


@pytest.mark.parametrize("text", ["", "   ", "no braces here at all", "[1, 2, 3]", "{not json at all}"])
def test_no_object_is_a_clear_error(text):
    with pytest.raises(ExtractionError, match="JSON object"):
        extract_json_object(text)


CODE = "from manim import *\n\n\nclass DemoJourney(ThreeDScene):\n    def construct(self):\n        self.wait(1)\n"


def test_python_block_fenced_with_prose():
    text = f"Here is the file.\n\n```python\n{CODE}```\nLet me know."
    assert extract_python_block(text) == CODE


def test_longest_python_block_wins():
    text = f"```python\nx = 1\n```\nand the file:\n```py\n{CODE}```"
    assert extract_python_block(text) == CODE


def test_bare_code_is_accepted():
    assert extract_python_block(CODE) == CODE


def test_prose_without_code_is_an_error():
    with pytest.raises(ExtractionError, match="fenced python block"):
        extract_python_block("I could not write the scene, sorry about that.")


def test_scene_class_prefers_three_d_scene():
    code = "from manim import *\nclass Helper(Scene):\n    pass\nclass MainStory(ThreeDScene):\n    pass\n"
    assert find_scene_class(code) == "MainStory"
    assert find_scene_class("import manim\nclass A(manim.Scene):\n    pass\n") == "A"


def test_scene_class_missing_or_unparsable():
    with pytest.raises(ExtractionError, match="no Scene subclass"):
        find_scene_class("class A:\n    pass\n")
    with pytest.raises(ExtractionError, match="does not parse"):
        find_scene_class("class A(Scene:\n")
