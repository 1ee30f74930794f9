"""Folder order across servers that list differently (``sakura.platform.store.base``)."""

from __future__ import annotations

from sakura.platform.store.base import cursor_prefixes, folder_after, listing_complete


def test_a_cursors_prefixes_before_a_dash_or_dot_come_after_it_in_folder_order():
    assert cursor_prefixes("face-swap.v2") == ["face", "face-swap"]
    assert cursor_prefixes("face_x") == [] and cursor_prefixes("") == []
    assert all(folder_after(p, "face-swap.v2") for p in cursor_prefixes("face-swap.v2"))


def test_a_listing_is_complete_once_it_read_past_the_extensions_of_every_chosen_name():
    assert not listing_complete(["a", "b"], "b")  # "b-x" may follow "b" and sort before it
    assert not listing_complete(["a", "b"], "b.v2")
    assert listing_complete(["a", "b"], "b0")  # past every "b-"/"b." name
    assert listing_complete(["a.b", "a"], "a0")
