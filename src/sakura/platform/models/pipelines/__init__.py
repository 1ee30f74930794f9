"""Diffusers pipeline folders: load one for the cloud (every component) or the phone (what
replay needs), and the adapters that run them (FLUX.2 klein KV first)."""

from sakura.platform.models.pipelines.folder import (
    INDEX,
    PipelineError,
    PipelineFolder,
    PipelineKind,
    is_pipeline_folder,
    load_pipeline,
    register_pipeline,
    supported_pipelines,
)

__all__ = [
    "INDEX",
    "PipelineError",
    "PipelineFolder",
    "PipelineKind",
    "is_pipeline_folder",
    "load_pipeline",
    "register_pipeline",
    "supported_pipelines",
]
