"""gateway.base.ids.IdPool: ids for bulk writes, shaped as new_id's and never repeated."""

from __future__ import annotations

import re

from gateway.base.ids import IdPool, new_id


def test_pooled_ids_look_like_minted_ones_and_do_not_repeat_across_refills() -> None:
    """Each pooled id is the prefix then 32 hex digits, like new_id's; several refills give no repeat."""
    pool = IdPool("memory", batch=3)
    taken = [pool.take() for _ in range(10)]
    shape = re.compile(r"^hmem_[0-9a-f]{32}$")
    assert all(shape.match(i) for i in taken) and shape.match(new_id("memory"))
    assert len(set(taken)) == 10
