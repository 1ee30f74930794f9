"""The build job against real Ray, on local disk and on S3 (SeaweedFS, a real S3 server)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sakura.jobs.build import main as build
from sakura.platform.levelfile import read_shard_payload
from sakura.platform.library import TemplateLibrary
from sakura.platform.store import open_store


def write_spec(tmp_path: Path, images: dict[str, str]) -> Path:
    """A spec whose images are PNG files in tmp_path (so a test can change one)."""
    from skimage import io as skio

    from sakura.platform.images import load_image

    lines = ["templates:"]
    for i, (tid, ref) in enumerate(images.items()):
        skio.imsave(tmp_path / f"{tid}.png", load_image(ref), check_contrast=False)
        lines += [f"  - id: {tid}", f"    task: {['try_on', 'style_transfer', 'face_swap'][i % 3]}",
                  f"    image: {tid}.png", f"    prompt: template {tid}"]
    path = tmp_path / "spec.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def check_library(store_uri: str) -> TemplateLibrary:
    """Every visible version is complete: all level files exist and every shard verifies."""
    library = TemplateLibrary(open_store(store_uri))
    for template_id in library.templates():
        for version in library.versions(template_id):
            manifest = library.manifest(template_id, version)
            for level in manifest.levels:
                store = open_store(level.store or store_uri)
                for shard in manifest.shards:
                    read_shard_payload(store, level.key, shard.levels[level.name])
        for alias, version in library.aliases(template_id).items():
            assert version in library.versions(template_id), (template_id, alias, version)
    return library


def run(spec: Path, store: str, cluster, *extra: str) -> int:
    return build(["--spec", str(spec), "--model", "tiny-flux", "--store", store, "--create",
                  "--ray-address", cluster.address, "--calibration", "1", *extra])


def test_build_publishes_skips_unchanged_and_versions_only_what_changed(tmp_path, ray_cluster, seaweed_uri, capsys):
    """On SeaweedFS; what is store-specific is the store contract suite's (the kill tests and the
    demo's test build on local folders)."""
    store = seaweed_uri
    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick", "tpl-b": "skimage:coffee", "tpl-c": "skimage:lfw_subset/85"})
    assert run(spec, store, ray_cluster) == 0
    library = check_library(store)
    assert library.templates() == ["tpl-a", "tpl-b", "tpl-c"]
    assert all(library.versions(t) == [1] for t in library.templates())

    capsys.readouterr()
    assert run(spec, store, ray_cluster) == 0
    assert "nothing new to publish" in capsys.readouterr().out
    assert all(library.versions(t) == [1] for t in library.templates())

    from skimage import io as skio

    from sakura.platform.images import load_image

    skio.imsave(tmp_path / "tpl-b.png", load_image("skimage:chelsea"), check_contrast=False)
    assert run(spec, store, ray_cluster) == 0
    assert library.versions("tpl-a") == [1] and library.versions("tpl-c") == [1]
    assert library.versions("tpl-b") == [1, 2] and library.resolve("tpl-b", "latest") == 2
    check_library(store)


def test_pyarrow_reads_the_s3_library_without_sakura(tmp_path, ray_cluster, seaweed_server, seaweed_uri):
    import pyarrow.parquet as pq

    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick"})
    assert run(spec, seaweed_uri, ray_cluster) == 0
    client = seaweed_server.client()
    bucket = seaweed_uri.split("/")[2]
    import json

    manifest_key = "lib/templates/tpl-a/versions/1/manifest.json"
    manifest = json.loads(client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
    for level in manifest["levels"]:
        data = client.get_object(Bucket=bucket, Key=f"lib/{level['key']}")["Body"].read()
        parquet = pq.ParquetFile(io.BytesIO(data))
        assert parquet.metadata.num_row_groups == len(manifest["shards"])
        for shard in manifest["shards"]:
            loc = shard["levels"][level["name"]]
            group = parquet.metadata.row_group(loc["row_group"])
            assert group.num_rows == 1
            assert group.column(0).data_page_offset == loc["row_group_offset"]
            last = group.column(group.num_columns - 1)
            group_end = loc["row_group_offset"] + loc["row_group_length"]
            assert last.data_page_offset + last.total_compressed_size == group_end
            row = parquet.read_row_group(loc["row_group"]).to_pylist()[0]
            assert row["index"] == shard["index"] and row["layer"] == shard["layer"]
            assert row["payload"] == data[loc["offset"] : loc["offset"] + loc["length"]]


@pytest.mark.parametrize(
    "case, message",
    [
        ("bad-id", "field 'id'"),
        ("missing-image", "field 'image'"),
        ("unknown-model", "unknown model"),
        ("unreachable-store", "is not usable"),
    ],
)
def test_bad_input_fails_before_anything_is_written(case, message, tmp_path, capsys):
    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick"})
    store, model = f"file://{tmp_path}/lib", "tiny-flux"
    if case == "bad-id":
        spec.write_text(spec.read_text().replace("id: tpl-a", "id: Bad/Id"))
    elif case == "missing-image":
        (tmp_path / "tpl-a.png").unlink()
    elif case == "unknown-model":
        model = "gpt-7"
    else:
        store = "s3://some-bucket/x?endpoint=http://127.0.0.1:9"
    code = build(["--spec", str(spec), "--model", model, "--store", store, "--create"])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "lib").exists() or not any((tmp_path / "lib").rglob("*.json"))


def test_concurrent_builds_never_share_a_version_or_corrupt_the_alias(tmp_path, ray_cluster):
    import subprocess
    import sys

    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick"})
    store = f"file://{tmp_path}/lib"
    cmd = [
        sys.executable, "-m", "sakura.jobs.build", "--spec", str(spec), "--model", "tiny-flux", "--store", store,
        "--create", "--ray-address", ray_cluster.address, "--calibration", "1",
    ]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        p.wait(timeout=300)
        assert p.returncode == 0, p.stderr.read().decode()[-2000:]
    library = check_library(store)
    versions = library.versions("tpl-a")
    assert 1 <= len(versions) <= 2 and versions == sorted(set(versions))
    for v in versions:
        assert library.manifest("tpl-a", v).version == v
    assert library.resolve("tpl-a", "latest") == max(versions)
