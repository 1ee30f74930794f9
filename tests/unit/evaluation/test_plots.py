"""Pictures a person understands without the docs: labelled panels, and a timeline legend with
every kind of box it draws and no level it did not use."""

from __future__ import annotations

import numpy as np
from skimage.io import imread

from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.emulation.traces import BandwidthTrace
from sakura.evaluation.plots import COMPUTE_COLOURS, PREAMBLE_LABEL, REQUEST_LABEL, bandwidth, gantt, image_grid, legend


def test_the_timeline_legend_names_requests_compute_and_stalls_and_only_the_levels_used():
    edit = Timeline("hybrid", shards=[ShardTiming(index=0, level="medium"), ShardTiming(index=1, level="compact"),
                                      ShardTiming(index=2, level="full", source="computed")])  # not fetched
    labels = list(legend({"live": edit}))
    assert labels[0] == REQUEST_LABEL and set(COMPUTE_COLOURS) <= set(labels)
    assert "medium (fetch, decode)" in labels and "compact (fetch, decode)" in labels
    assert not any(label.startswith(("full", "cachegen")) for label in labels)


def test_an_image_grid_has_a_title_over_each_column(tmp_path):
    tiles = [[np.full((8, 8, 3), v) for v in (0.0, 0.5, 1.0)]]
    path = image_grid(tmp_path / "grid.png", tiles, columns=["photo", "template", "edit"], title="t")
    picture = imread(path)
    assert picture.ndim == 3 and picture.shape[1] > 3 * 8 * 4  # drawn at figure scale, with room for titles


def _edit(preamble_s: float) -> Timeline:
    """A hybrid edit: block 0 computed, block 1 fetched at compact."""
    return Timeline("hybrid", preamble_s=preamble_s, compute_start=preamble_s, compute_end=preamble_s + 1.0, shards=[
        ShardTiming(index=0, level="compute", source="computed", needed_at=0.35, consumed_at=0.6, decoded_at=0.6),
        ShardTiming(index=1, level="compact", bytes=2_500, chosen_at=0.3, requested_at=0.3, first_byte_at=0.44,
                    arrived_at=0.5, decode_started_at=0.5, decoded_at=0.501, needed_at=0.7, consumed_at=0.7)])


def test_the_timeline_legend_names_the_manifest_where_an_edit_fetched_one():
    assert PREAMBLE_LABEL in legend({"live": _edit(0.3)})
    assert PREAMBLE_LABEL not in legend({"cached": _edit(0.0)})


def test_the_timeline_and_the_bandwidth_picture_draw_fetched_and_computed_blocks(tmp_path):
    trace = BandwidthTrace("slow", "test", np.array([0.0, 0.5]), np.array([0.2, 0.05]), 60.0)  # kbit/s on the axis
    for path in (gantt(tmp_path / "timeline.png", {"a": _edit(0.3), "b": _edit(0.0)}, "t"),
                 bandwidth(tmp_path / "bandwidth.png", trace, 10.0, _edit(0.3), "t")):
        picture = imread(path)
        assert picture.ndim == 3 and picture.shape[0] > 200
