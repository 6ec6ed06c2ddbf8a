"""memo.Memo: the value built for the newest key, rebuilt when the key changes."""
from __future__ import annotations

import threading
from typing import List

from svcposture.monitor.memo import Memo


def test_the_same_key_reuses_the_value_and_a_new_key_rebuilds_it():
    built: List[int] = []
    memo: Memo[bytes] = Memo()

    def build(n: int) -> bytes:
        built.append(n)
        return b"v%d" % n

    summary = {"probedAt": "a"}
    assert memo.get((1, summary), build, 1) == b"v1"
    assert memo.get((1, summary), build, 2) == b"v1"  # same key: not built again
    assert memo.get((2, summary), build, 3) == b"v3"
    assert memo.get((1, summary), build, 4) == b"v4"  # only the newest key is kept
    assert built == [1, 3, 4]
    memo.clear()
    assert memo.get((1, summary), build, 5) == b"v5"


def test_a_key_holds_its_objects_so_an_equal_but_new_object_matches_and_a_changed_one_does_not():
    memo: Memo[str] = Memo()
    first = {"probedAt": "a"}
    assert memo.get((first,), lambda: "first") == "first"
    assert memo.get(({"probedAt": "a"},), lambda: "equal") == "first"  # equal content: the same bytes
    assert memo.get(({"probedAt": "b"},), lambda: "second") == "second"


def test_readers_on_many_threads_see_whole_pairs():
    memo: Memo[int] = Memo()
    wrong: List[int] = []

    def reader(k: int) -> None:
        for i in range(2000):
            key = (i % 7, k % 2)
            if memo.get(key, lambda: key[0] * 10 + key[1]) != key[0] * 10 + key[1]:
                wrong.append(i)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert wrong == []
