"""The server's document store: what each rule keeps, LRU eviction and the context status, commits that land only on
the stored document (not after a delete or an eviction), a failed new document forgotten."""

from __future__ import annotations

import pytest

from ctxmt_cli.serve.documents import CONTINUED, EVICTED, NEW, DocumentStore, KeepRule


def ids(n: int) -> list[tuple[int, ...]]:
    return [(i,) for i in range(n)]


@pytest.mark.parametrize("rule, totals, kept", [
    (KeepRule(window=2), [0, 1, 2, 3, 10], [0, 1, 2, 2, 2]),
    (KeepRule(window=0), [0, 5], [0, 0]),
    (KeepRule(group=3), [0, 1, 2, 3, 4, 7], [0, 1, 2, 0, 1, 1]),       # the unfinished group of 3
    (KeepRule(max_sentences=10), [0, 4, 9], [0, 4, 9]),                 # the whole document
])
def test_each_rule_keeps_what_the_model_reads(rule, totals, kept):
    assert [rule.keep(t) for t in totals] == kept


def test_rules_say_what_they_keep():
    assert [KeepRule(window=k).describe() for k in (0, 1, 3)] == ["no sentence", "the last sentence",
                                                                  "the last 3 sentences"]
    assert KeepRule(group=4).describe() == "the unfinished group's sentences (< 4)"
    assert KeepRule(max_sentences=9).describe() == "the whole document (at most 9 sentences)"


def test_commits_keep_the_last_sentences_of_a_window():
    store = DocumentStore(4, KeepRule(window=2))
    snap = store.begin("a")
    assert snap.status == NEW and snap.src == [] and snap.tgt == []
    assert store.commit(snap, ["s1", "s2", "s3"], ids(3), [])
    snap = store.begin("a")
    assert (snap.status, snap.src, snap.tgt, snap.state.total) == (CONTINUED, ["s2", "s3"], [(1,), (2,)], 3)
    assert store.commit(snap, ["s4"], [(9,)], [])
    snap = store.begin("a")
    assert (snap.src, snap.tgt, snap.state.total) == (["s3", "s4"], [(2,), (9,)], 4)


def test_a_group_rule_keeps_the_unfinished_group_and_first_passes():
    store = DocumentStore(4, KeepRule(group=3))
    snap = store.begin("a")
    store.commit(snap, ["s1", "s2", "s3", "s4"], ids(4), ["f1", "f2", "f3", "f4"])
    snap = store.begin("a")
    assert (snap.src, snap.first_pass) == (["s4"], ["f4"])                  # sentence 4 opened the second group
    store.commit(snap, ["s5", "s6"], ids(2), ["f5", "f6"])
    assert store.begin("a").src == []                                       # the second group is complete


def test_the_least_recently_used_document_is_evicted_and_says_so():
    store = DocumentStore(2, KeepRule(window=1))
    for doc in ("a", "b"):
        store.commit(store.begin(doc), [doc], ids(1), [])
    store.begin("a")                                                        # a is now the most recent
    store.commit(store.begin("c"), ["c"], ids(1), [])                       # evicts b
    assert store.ids() == ["a", "c"] and store.evictions == 1
    snap = store.begin("b")
    assert snap.status == EVICTED and snap.src == []                        # starts anew, and knows why
    assert store.ids() == ["c", "b"]                                        # a went this time
    assert store.begin("a").status == EVICTED
    assert store.delete("a")
    assert store.begin("a").status == NEW                                   # deleted: forgotten, not evicted


def test_a_commit_after_a_delete_or_an_eviction_is_dropped():
    store = DocumentStore(1, KeepRule(window=2))
    snap = store.begin("a")
    assert store.delete("a") and not store.delete("a")
    assert not store.commit(snap, ["late"], ids(1), []) and store.ids() == []
    snap = store.begin("a")
    store.begin("b")                                                        # evicts a while it is in flight
    assert not store.commit(snap, ["late"], ids(1), [])
    assert store.begin("a").status == EVICTED


def test_a_failed_new_document_is_forgotten_but_a_continued_one_is_kept():
    store = DocumentStore(3, KeepRule(window=1))
    store.abandon(store.begin("new"))
    assert store.ids() == []
    store.commit(store.begin("old"), ["s"], ids(1), [])
    store.abandon(store.begin("old"))
    assert store.ids() == ["old"] and store.begin("old").src == ["s"]
    with pytest.raises(ValueError):
        DocumentStore(0, KeepRule(window=1))
