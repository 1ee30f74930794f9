"""The log of create-only records (sakura.platform.record_log) on a local folder store."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from sakura.platform.record_log import Head, RecordLog, parse_record
from sakura.platform.store import AlreadyExists, ObjectInfo, open_store
from tests.unit.platform.library_helpers import Faulty


@pytest.fixture
def store(tmp_path):
    return open_store(f"file://{tmp_path}/root")


def _numbers(log: RecordLog) -> list[int]:
    return log.seqs()


def test_an_empty_log_reads_as_nothing_and_its_first_move_writes_record_1(store):
    log = RecordLog(store, "things/a/")
    assert log.head() == Head(0, None) and list(log.older(5)) == []
    assert log.append(log.head(), b"one") == 1
    assert log.head() == Head(1, b"one") and store.get("things/a/000000000001.json") == b"one"
    assert parse_record("000000000001.json") == 1 and parse_record("1.json") is None


def test_a_missing_root_reads_as_an_empty_log(tmp_path):
    assert RecordLog(open_store(f"file://{tmp_path}/nowhere"), "x/").head() == Head(0, None)


def test_the_legacy_document_is_read_until_the_first_move_and_stays_oldest(store):
    store.put("things/a.json", b"before")
    log = RecordLog(store, "things/a/", legacy="things/a.json")
    assert log.head() == Head(0, b"before")
    head, moved = log.move(lambda h: h.data + b" and after" if h.data else None)
    assert moved and head == Head(1, b"before and after") and log.head() == head
    assert list(log.older(2)) == [Head(1, b"before and after"), Head(0, b"before")]
    assert store.get("things/a.json") == b"before"  # left alone: the records are the value now


def test_two_movers_that_read_the_same_record_write_one_record_between_them(store):
    log = RecordLog(store, "n/")
    start = log.head()
    assert log.append(start, b"first") == 1
    assert log.append(start, b"second") is None  # the number is taken: read again, decide again
    assert log.head() == Head(1, b"first")


def test_concurrent_moves_lose_nothing_and_number_the_records_without_gaps(store):
    """Six threads each add one to a counter twenty times: every move is in the log."""
    log = RecordLog(store, "counter/", keep=1000)

    def bump() -> None:
        for _ in range(20):
            log.move(lambda h: str(int(h.data or b"0") + 1).encode())

    threads = [threading.Thread(target=bump) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert log.head() == Head(120, b"120") and _numbers(log) == list(range(1, 121))


def test_a_move_that_decides_nothing_writes_nothing(store):
    log = RecordLog(store, "n/")
    log.append(log.head(), b"x")
    assert log.move(lambda h: None) == (Head(1, b"x"), False) and _numbers(log) == [1]


def test_old_records_are_pruned_keep_behind_the_newest(store):
    log = RecordLog(store, "n/", keep=3)
    for i in range(10):
        log.move(lambda h, i=i: str(i).encode())
    assert _numbers(log) == [7, 8, 9, 10] and log.head() == Head(10, b"9")
    assert [h.seq for h in log.older(10)] == [9, 8, 7]


def test_a_log_kept_whole_is_never_pruned_and_never_listed_after_a_write(store):
    """A claim's log: its record 1 reserves a version number, so no number is ever freed."""
    ops: list[str] = []

    class Listed(Faulty):
        def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
            ops.append("list")
            return super().list(prefix)

    log = RecordLog(Listed(store, hook=lambda op, key: ops.append(op)), "claim/", keep=None)
    for i in range(12):
        assert log.append(Head(i, None), str(i).encode()) == i + 1
    assert ops == ["put_if_absent"] * 12 and _numbers(log) == list(range(1, 13))
    with pytest.raises(AlreadyExists):
        store.put_if_absent(log.key(1), b"a second owner")


def test_a_stalled_mover_whose_number_was_pruned_moves_again_from_the_newest(store):
    """The mover read record 1, stalled while others moved far on (record 2 pruned), then wrote
    record 2: that ghost would sit under records that never saw it. The log takes it out and the
    move reads and decides again."""
    log = RecordLog(store, "n/", keep=2)
    stale = Head(1, log.move(lambda h: b"a")[0].data)
    for i in range(6):
        log.move(lambda h, i=i: str(i).encode())
    assert 2 not in _numbers(log)
    assert log.append(stale, b"late") is None
    assert 2 not in _numbers(log) and log.head().seq == 7
    head, moved = log.move(lambda h: b"late, again")
    assert moved and head == Head(8, b"late, again") and log.head() == head


def test_a_reader_lists_again_if_the_newest_record_vanishes_under_it(store):
    log = RecordLog(store, "n/")
    log.append(log.head(), b"one")
    log.append(Head(1, b"one"), b"two")
    listed = iter([[1, 2], [1]])
    real = log.seqs

    class Vanishing(RecordLog):
        def seqs(self) -> list[int]:
            return next(listed, None) or real()

    store.delete(log.key(2))  # taken out between the listing and the read
    assert Vanishing(store, "n/").head() == Head(1, b"one")
