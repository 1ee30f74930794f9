"""Pictures a person understands without the docs: labelled panels, and a timeline legend with
every kind of box it draws and no level it did not use."""

from __future__ import annotations

import numpy as np
from skimage.io import imread

from sakura.edge_client.timeline import ShardTiming, Timeline
from sakura.evaluation.plots import COMPUTE_COLOURS, REQUEST_LABEL, image_grid, legend


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
