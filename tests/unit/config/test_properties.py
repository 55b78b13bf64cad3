import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.config.properties import PropertiesError, parse_properties


def test_comments_separators_and_whitespace():
    text = """
# a comment
! another comment
   key1=value1
key2 : value2
key3 value3
key4=   spaced value  {trailing}
empty=
""".format(trailing="")
    assert parse_properties(text) == {
        "key1": "value1",
        "key2": "value2",
        "key3": "value3",
        "key4": "spaced value  ",
        "empty": "",
    }


def test_line_continuation_and_escapes():
    text = (
        "listeners=PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\n"
        "path=C\\:\\\\data\\tx\nuni=\\u0041B\nkey\\ with\\ space=v\n"
    )
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093"
    assert props["path"] == "C:\\data\tx"
    assert props["uni"] == "AB"
    assert props["key with space"] == "v"


def test_even_backslashes_do_not_continue():
    props = parse_properties("a=x\\\\\nb=y\n")
    assert props == {"a": "x\\", "b": "y"}


def test_later_keys_win():
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_bad_unicode_escape_names_the_line():
    with pytest.raises(PropertiesError, match="line 2"):
        parse_properties("ok=1\nbad=\\u12G4\n")


_key = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="\\=:#!"), min_size=1, max_size=12
)
_value = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="\\"), max_size=20)


@given(st.dictionaries(_key, _value, max_size=8))
def test_roundtrip_simple_pairs(d):
    text = "".join(f"{k}={v}\n" for k, v in d.items())
    assert parse_properties(text) == {k: v.lstrip(" ") for k, v in d.items()}
