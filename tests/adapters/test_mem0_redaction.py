"""The vendor key is redacted from a vendor's error text before the text is cut to length."""

from __future__ import annotations

import httpx
import pytest

from adapters.errors import ProviderRejected
from adapters.mem0 import Mem0Provider
from tests.adapters.fake_mem0 import OSS_URL, Variant

KEY = "m0-SECRET-redaction-key-0123456789abcdef"


@pytest.mark.parametrize("variant", ["platform", "oss"])
@pytest.mark.parametrize("at", [150, 170, 185, 190])
async def test_a_key_cut_in_half_by_the_length_cap_is_still_redacted(variant: Variant, at: int) -> None:
    """A vendor error echoing the key where the 200-character cap falls shows no part of the key."""
    body = "x" * at + KEY + " trailing words"
    echo = httpx.MockTransport(lambda request: httpx.Response(400, text=body))
    async with httpx.AsyncClient(transport=echo) as client:
        mem0 = Mem0Provider(client, base_url=OSS_URL, api_key=KEY, variant=variant)
        with pytest.raises(ProviderRejected) as raised:
            await mem0.list("hmem_" + "a" * 32)
    said = f"{raised.value} {raised.value!r} {raised.value.args!r}"
    for size in range(8, len(KEY) + 1):
        assert KEY[:size] not in said, said
    if at + len("[redacted]") <= 200:  # the marker itself fits under the cap
        assert "[redacted]" in said
