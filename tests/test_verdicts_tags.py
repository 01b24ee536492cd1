"""Tag parser: every syntax case of the reference, malformed counting, and a fuzz that it never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mythloop.verdicts import count_malformed_tags, parse_tags, scan_tags


def one(text: str) -> dict:
    tags = parse_tags(text)
    assert len(tags) == 1, tags
    return tags[0]


def test_basic_double_quoted_tag():
    tag = one('done.\n<skill-used name="regex-debugger" verdict="HELPFUL" reason="Explained the backtracking"/>')
    assert tag == {"name": "regex-debugger", "verdict": "HELPFUL", "reason": "Explained the backtracking"}


def test_underscore_form_single_quotes_and_any_order():
    tag = one("<skill_used reason='nested quantifiers are wrong' verdict='harmful' name='naive-regex-matcher' />")
    assert tag == {"name": "naive-regex-matcher", "verdict": "HARMFUL", "reason": "nested quantifiers are wrong"}


def test_apostrophe_inside_double_quoted_reason_is_kept():
    tag = one('<skill-used name="pytest-fixtures" verdict="HELPFUL" reason="It\'s the fixture pattern I used"/>')
    assert tag["reason"] == "It's the fixture pattern I used"


def test_greater_than_inside_quoted_value_is_kept():
    tag = one('<skill-used name="a" verdict="NEUTRAL" reason="x -> y when n > 3"/>')
    assert tag["reason"] == "x -> y when n > 3"


def test_case_insensitive_tag_attributes_and_verdict():
    tag = one('<SKILL-USED NAME="pytest-fixtures" Verdict="Helpful" REASON="used its parametrize table"/>')
    assert tag["name"] == "pytest-fixtures" and tag["verdict"] == "HELPFUL"


def test_tag_without_name_is_skipped_and_counted():
    text = '<skill-used verdict="HELPFUL" reason="no name here"/> <skill-used name="b" verdict="NEUTRAL"/>'
    tags, malformed = scan_tags(text)
    assert [t["name"] for t in tags] == ["b"]
    assert tags[0]["reason"] == ""
    assert malformed == 1


def test_several_tags_in_order_and_non_self_closing():
    text = (
        'Answer...\n<skill-used name="one" verdict="HELPFUL" reason="first reason text">\n'
        "prose <skill_used name='two' verdict='HARMFUL' reason='second reason text'/>"
    )
    assert [t["name"] for t in parse_tags(text)] == ["one", "two"]


def test_unclosed_quote_does_not_swallow_the_next_tag():
    text = '<skill-used name="a" reason="oops/>\n<skill-used name="b" verdict="HELPFUL" reason="fine reason"/>'
    tags, malformed = scan_tags(text)
    assert [t["name"] for t in tags] == ["b"]
    assert malformed == 1
    assert count_malformed_tags(text) == 1


def test_entities_unescaped_and_whitespace_collapsed():
    tag = one('<skill-used name=" pytest-fixtures " verdict=" neutral " reason="said &quot;use fixtures&quot;\n  twice"/>')
    assert tag == {"name": "pytest-fixtures", "verdict": "NEUTRAL", "reason": 'said "use fixtures" twice'}


def test_no_tags_and_non_string_input():
    assert parse_tags("no tags at all <skill> <skill-usedx name='a'/>") == []
    assert parse_tags(None) == [] and count_malformed_tags(b"bytes") == 0


_pieces = st.sampled_from([
    "<skill-used", "<skill_used", "<SKILL-USED", " name=", " verdict=", " reason=", '"', "'", "/>",
    ">", "<", "=", " ", "HELPFUL", "harmful", "it's", "&quot;", "&#x", "\n", "a-b", "\x00", "é",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_pieces, st.text(max_size=8)), max_size=40))
def test_fuzz_never_raises_and_returns_well_formed_tags(parts):
    text = "".join(parts)
    tags, malformed = scan_tags(text)
    assert malformed >= 0
    for tag in tags:
        assert set(tag) == {"name", "verdict", "reason"}
        assert tag["name"] and tag["name"] == tag["name"].strip()
        assert tag["verdict"] == tag["verdict"].upper()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters='"<'), min_size=1, max_size=60))
def test_fuzz_any_double_quoted_reason_round_trips(reason):
    text = f'<skill-used name="x" verdict="HELPFUL" reason="{reason}"/>'
    tag = one(text)
    import html

    assert tag["reason"] == " ".join(html.unescape(reason).split())
