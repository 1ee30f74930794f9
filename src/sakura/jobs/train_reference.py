"""Train the reference editing model: a deterministic flow-matching run, as a Ray job.

    python -m sakura.jobs.train_reference --out DIR [--steps N] [--ray-address ADDR]
    sakura train-reference ...

The training loop itself (:func:`train`) is plain PyTorch and deterministic for a given seed
and thread count; the job runs it as one Ray task on the local Ray by default (or on a cluster
given ``--ray-address``/``RAY_ADDRESS``), then writes the weights (safetensors), the config
and a model card with held-out metrics.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from sakura._argparse import command_parser
from sakura.jobs import reference_data as data
from sakura.platform.models import PixelCodec
from sakura.platform.models.reference_dit import ReferenceEditDiT


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1100
    batch: int = 32
    lr: float = 6e-4
    warmup: int = 100
    weight_decay: float = 0.0
    seed: int = 0
    threads: int = 2
    hidden: int = 128
    depth: int = 6
    heads: int = 4
    patch_size: int = 2
    log_every: int = 50


@dataclass
class TrainResult:
    config: TrainConfig
    state_dict: dict[str, torch.Tensor]
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def build_model(config: TrainConfig) -> ReferenceEditDiT:
    torch.manual_seed(config.seed)
    return ReferenceEditDiT(resolution=data.RESOLUTION, patch_size=config.patch_size, hidden=config.hidden,
                            depth=config.depth, heads=config.heads, tasks=len(data.TASKS) + 1)


def train(config: TrainConfig, log: Callable[[str], None] = print) -> TrainResult:
    """Flow matching: x_t = (1 - t) x0 + t eps, the model predicts eps - x0; t is logit-normal."""
    torch.set_num_threads(config.threads)
    torch.use_deterministic_algorithms(True)
    model = build_model(config).train()
    gen = torch.Generator().manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, config))
    # The same pixel codec the adapter uses at inference, so tokens are laid out identically.
    codec = PixelCodec(data.RESOLUTION, config.patch_size, 3 * config.patch_size**2)
    losses, start = [], time.perf_counter()
    for step in range(config.steps):
        batch = data.sample_batch("train", config.batch, rng)
        x0, user, tpl = (codec.encode(a).flatten(1, 2) for a in (batch.target, batch.user, batch.template))
        task = torch.from_numpy(batch.task)
        t = torch.sigmoid(torch.randn(config.batch, generator=gen))
        eps = torch.randn(x0.shape, generator=gen)
        xt = (1 - t)[:, None, None] * x0 + t[:, None, None] * eps
        loss = torch.nn.functional.mse_loss(model(xt, user, t, tpl, task), eps - x0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if (step + 1) % config.log_every == 0 or step == 0:
            recent = np.mean(losses[-config.log_every :])
            log(f"step {step + 1}/{config.steps} loss {recent:.4f} ({time.perf_counter() - start:.0f} s)")
    model.eval()
    return TrainResult(config, {k: v.detach().clone() for k, v in model.state_dict().items()}, losses,
                       time.perf_counter() - start)


def _lr_factor(step: int, config: TrainConfig) -> float:
    if step < config.warmup:
        return (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def save(result: TrainResult, out: Path) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    model = build_model(result.config)
    model.load_state_dict(result.state_dict)
    save_file({k: v.contiguous() for k, v in result.state_dict.items()}, str(out / "reference.safetensors"))
    (out / "reference.json").write_text(json.dumps({
        "model_config": {k: v for k, v in dict(model.config).items() if not k.startswith("_")},
        "train_config": asdict(result.config),
        "train_seconds": round(result.seconds, 1), "final_loss": float(np.mean(result.losses[-50:])),
        "loss_curve": [round(float(np.mean(result.losses[i : i + 50])), 4) for i in range(0, len(result.losses), 50)],
    }, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("sakura train-reference", __doc__)
    defaults = TrainConfig()
    parser.add_argument("--steps", type=int, default=defaults.steps, help="training steps (optimizer updates)")
    parser.add_argument("--batch", type=int, default=defaults.batch, help="training examples per step")
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="random seed for the initial weights, the training data and the noise")
    parser.add_argument("--threads", type=int, default=defaults.threads, help="CPU threads for the training task")
    parser.add_argument("--num-gpus", type=float, default=0.0,
                        help="GPUs for the training task (on clusters that have them)")
    parser.add_argument("--out", type=Path, required=True,
                        help="where the weights and config go (the shipped ones: src/sakura/platform/models/weights)")
    parser.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"),
                        help="Ray cluster address (the default comes from RAY_ADDRESS); none: start a local Ray")
    args = parser.parse_args(argv)
    config = TrainConfig(steps=args.steps, batch=args.batch, seed=args.seed, threads=args.threads)

    import ray

    from sakura._ray import join_or_start

    join_or_start(args.ray_address)
    try:
        remote = ray.remote(num_cpus=config.threads, num_gpus=args.num_gpus)(train)
        result = ray.get(remote.remote(config))
    finally:
        ray.shutdown()
    save(result, args.out)
    final_loss = np.mean(result.losses[-50:])
    print(f"trained {config.steps} steps in {result.seconds / 60:.1f} min; final loss {final_loss:.4f}")
    print(f"wrote {args.out / 'reference.safetensors'} and {args.out / 'reference.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
