"""gateway/api/limits.py: the depth limit is exact, and the fast paths never skip a value they must check."""

from __future__ import annotations

import pytest

from gateway.base import limits
from gateway.base.errors import ApiError


def test_nesting_at_the_limit_is_read_and_one_more_level_is_refused() -> None:
    """64 levels of mixed arrays and objects parse; 65 are 400 memfed_json_too_deep."""
    at = '{"a": [' * 32 + "1" + "]}" * 32
    assert limits.depth(limits.loads(at)) == limits.MAX_JSON_DEPTH
    with pytest.raises(ApiError) as refused:
        limits.loads("[" + at + "]")
    assert refused.value.status == 400 and refused.value.code == "memfed_json_too_deep"


@pytest.mark.parametrize("text", ['["\\uD800"]', '{"k": "\\udfff"}', '{"\\uDBFF": 1}', '[1, 9223372036854775808]',
                                  '[-9223372036854775809]'])
def test_surrogates_and_huge_integers_are_found_whatever_their_spelling(text: str) -> None:
    """Upper- or lower-case escapes, keys or values, either sign past 64 bits: each is named."""
    raw = text.encode()
    assert limits.plain_problem(limits.loads(raw), raw) is not None


def test_a_valid_surrogate_pair_and_the_largest_integer_are_fine() -> None:
    """An escaped pair is one real character; 2^63-1 and -2^63 fit."""
    raw = b'["\\ud83d\\ude00", 9223372036854775807, -9223372036854775808]'
    assert limits.plain_problem(limits.loads(raw), raw) is None
