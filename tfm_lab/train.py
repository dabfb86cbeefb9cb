"""Chapter 8 in practice — train a Transformer on a synthetic task, on CPU or GPU(s).

    python -m tfm_lab.train --task dates --steps 3000 --device auto --out runs/dates
    python -m tfm_lab.train --task dates --steps 3000 --out runs/dates --resume   # after a stop
    torchrun --nproc_per_node=2 -m tfm_lab.train --task copy --steps 500 --out runs/copy

`train(TrainConfig(...))` is the importable entry point and returns the run's history; the CLI is a thin
wrapper that prints the history's summary as the last line of stdout (JSON). Batches are a pure function of
(seed, step) and checkpoints hold the generators, so a resumed or data-parallel run trains as one
uninterrupted process would. How it evaluates, picks its precision, compiles and buckets lengths, and why:
tfm_lab/README.md.

Shapes: B batch · S source positions · T target positions · V vocabulary.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from tfm_ref.config import TransformerConfig
from tfm_ref.losses import label_smoothed_cross_entropy
from tfm_ref.schedule import SCHEDULES, noam_lr, warmup_cosine_lr
from tfm_ref.transformer import DecoderOnlyLM, Transformer

from .cli import OneLineParser, SettingsError, check_device_name, check_writable_folder, pick_device
from .tasks import IGNORE_INDEX, TASKS, Batch, Task, make_task

__all__ = ["TrainConfig", "train", "build_model", "model_logits", "exact_match", "lr_at", "autocast", "autocast_dtype",
           "synchronize", "token_loss_sum", "rng_state", "restore_rng_state", "warm_up", "stop_compile_workers",
           "reached_for_good", "export_model", "TASK_MODELS", "PRECISIONS", "COMPILE_MODES", "check_compile_mode", "main"]

PRECISIONS = ("auto", "bf16", "fp32")
# torch.compile's modes: "reduce-overhead" replays the compiled steps as CUDA graphs (on a GPU),
# one launch instead of one per kernel, for models too small to keep a GPU busy between launches.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def check_compile_mode(mode: str) -> None:
    """Raise SettingsError naming ``mode`` unless it is one of `COMPILE_MODES` (the trainer's and the bench's)."""
    if mode not in COMPILE_MODES:
        raise SettingsError(f"unknown compile_mode {mode!r}; choose one of {list(COMPILE_MODES)}")

# Small models that learn each task quickly: Pre-Norm (stable at a high learning rate),
# no dropout (the data never repeats, so there is nothing to overfit).
_SMALL = dict(d_model=128, n_heads=4, d_ff=512, dropout=0.0, norm_first=True, max_len=64)
TASK_MODELS: dict[str, dict] = {
    "copy": dict(_SMALL, n_encoder_layers=0, n_decoder_layers=2),
    "reverse": dict(_SMALL, n_encoder_layers=0, n_decoder_layers=2),
    "sort": dict(_SMALL, n_encoder_layers=0, n_decoder_layers=2),
    "addition": dict(_SMALL, n_encoder_layers=0, n_decoder_layers=3),
    "dates": dict(_SMALL, n_encoder_layers=2, n_decoder_layers=2),
}


@dataclass
class TrainConfig:
    """Everything a run depends on (saved in its checkpoint).

    model: `TransformerConfig` fields overriding `TASK_MODELS[task]` (vocab_size comes from the task).
    task_args: keyword arguments of the task's constructor (e.g. ``{"n_digits": 8}``).

    Raises:
        SettingsError: a value that cannot work (it names the field and what it accepts).
    """

    task: str = "dates"
    steps: int = 2000
    batch_size: int = 256  # global batch, split across data-parallel ranks
    length_buckets: int = 0  # passes per step over rows of similar source length; 0: 2 on a CPU in float32 uncompiled, else 1
    lr: float = 2e-3  # the peak learning rate, reached at the end of the warmup
    schedule: str = "cosine"  # "cosine": warmup then cosine decay; "noam": the 2017 schedule (1/√step decay)
    warmup: int = 100
    min_lr_ratio: float = 0.02  # the cosine decays to lr · min_lr_ratio
    weight_decay: float = 0.01
    label_smoothing: float = 0.0
    grad_clip: float = 1.0
    eval_every: int = 200
    eval_size: int = 2000  # held-out examples of the last evaluation
    quick_eval_size: int = 0  # held-out examples of the evaluations before the last; 0: eval_size
    log_every: int = 10
    checkpoint_every: int = 0  # 0: at every evaluation
    stop_after: int = 0  # stop this invocation after this step (with a checkpoint), to resume later; 0: never
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"  # "auto": bf16 where the device has bf16 matrix units (see `autocast_dtype`)
    threads: int = 0  # CPU threads for PyTorch; 0 keeps its default, one per core (1 is fastest on a busy CPU)
    compile: bool = False
    compile_mode: str = "default"  # one of COMPILE_MODES, when compile
    out: str | None = None
    resume: bool = False
    progress: bool = True
    model: dict = field(default_factory=dict)
    task_args: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise SettingsError(f"unknown task {self.task!r}; choose one of {sorted(TASKS)}")
        for name in ("steps", "batch_size", "eval_every", "eval_size", "log_every"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("length_buckets", "warmup", "quick_eval_size", "checkpoint_every", "stop_after", "threads"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if self.lr <= 0:
            raise SettingsError(f"lr must be positive, got {self.lr}")
        if self.schedule not in SCHEDULES:
            raise SettingsError(f"unknown schedule {self.schedule!r}; choose one of {list(SCHEDULES)}")
        if self.schedule == "noam" and self.warmup < 1:
            raise SettingsError("the noam schedule needs warmup of at least 1 step")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise SettingsError(f"label_smoothing must lie in [0, 1), got {self.label_smoothing}")
        if self.precision not in PRECISIONS:
            raise SettingsError(f"unknown precision {self.precision!r}; choose one of {list(PRECISIONS)}")
        check_compile_mode(self.compile_mode)
        check_device_name(self.device)
        if self.resume and not self.out:
            raise SettingsError("resume needs out, the folder holding the checkpoint")


def lr_at(step: int, cfg: TrainConfig) -> float:
    """The learning rate of step ``step`` (0, 1, …): ``cfg.schedule`` with its peak ``cfg.lr`` at the end of warmup."""
    if cfg.schedule == "noam":
        # the paper's curve scaled to peak at cfg.lr: its d_model^−0.5 factor cancels, any width will do
        return cfg.lr * noam_lr(step + 1, 1, cfg.warmup) / noam_lr(cfg.warmup, 1, cfg.warmup)
    return warmup_cosine_lr(step, cfg.lr, cfg.warmup, cfg.steps, cfg.min_lr_ratio)


def build_model(task: Task, overrides: dict | None = None) -> tuple[nn.Module, TransformerConfig]:
    """The task's default model (`TASK_MODELS`), with ``overrides`` applied."""
    options = {**TASK_MODELS[task.name], **(overrides or {})}
    config = TransformerConfig(vocab_size=len(task.vocab), **options)
    return (Transformer(config) if task.kind == "seq2seq" else DecoderOnlyLM(config)), config


def model_logits(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Teacher-forced logits (B, T, V) of either model family."""
    if batch.src is None:
        return model(batch.inp)
    return model(batch.src, batch.inp, batch.src_mask)


def exact_match(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B,) bool: every scored position's argmax equals its target."""
    right = (logits.argmax(-1) == target) | (target == IGNORE_INDEX)  # (B, T)
    return right.all(dim=-1)


def token_loss_sum(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """The label-smoothed cross-entropy of logits (B, T, V), summed over the scored positions of
    target (B, T), in float32: the upcast happens here, so that compiled it fuses into the loss."""
    return label_smoothed_cross_entropy(logits.float(), target, smoothing, IGNORE_INDEX, reduction="sum")


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The dtype matrix products run in under ``precision``: bfloat16, or None for float32.

    "auto" is bf16 where the device has bf16 matrix units (CUDA capability 8.0 on, CPUs with AVX-512 BF16 or
    AMX); elsewhere bf16 is emulated and no faster (tfm_lab/README.md, "Precision").
    """
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.get_device_capability(device) >= (8, 0) else None
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}  # absent in older PyTorch
    return torch.bfloat16 if capabilities.get("avx512_bf16") or capabilities.get("amx_bf16") else None


def autocast(device: torch.device, dtype: torch.dtype | None):
    """Autocast to ``dtype`` (matrix products in it, reductions in fp32); nothing for None."""
    return nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def eval_chunks(data: Batch, device: torch.device) -> list[Batch]:
    """``data`` in the pieces one evaluation pass each takes: rows of similar source length, each
    piece trimmed to its longest source (`Batch.in_chunks`), so the encoder skips most of the
    padding. A CPU evaluates in pieces of 250 rows, which stay in its caches (with the trimming,
    half the time of unsorted pieces of 1000); a GPU in pieces of 1000, fewer launches."""
    return data.in_chunks(250 if device.type == "cpu" else 1000)


@torch.no_grad()
def _evaluate(model: nn.Module, chunks: list[Batch], device: torch.device,
              dtype: torch.dtype | None) -> tuple[float, float]:
    """Exact-match accuracy and mean token loss over the rows of ``chunks`` (`eval_chunks`, on ``device``)."""
    was_training = model.training
    model.eval()
    right, loss_sum, n_rows, n_scored = 0, 0.0, 0, 0
    for part in chunks:
        with autocast(device, dtype):
            logits = model_logits(model, part)
        right += int(exact_match(logits, part.target).sum())
        loss_sum += float(token_loss_sum(logits, part.target, 0.0))
        n_rows, n_scored = n_rows + len(part), n_scored + int((part.target != IGNORE_INDEX).sum())
    model.train(was_training)
    return right / n_rows, loss_sum / n_scored


def synchronize(device: torch.device) -> None:
    """Wait for the GPU's queued work, so that a clock read after it measures that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    """The states of the generators a training step draws from (dropout): the CPU's, and on CUDA
    the state of ``device`` — each data-parallel rank draws the same numbers on its own GPU, so
    rank 0's state is every rank's."""
    state = {"rng_cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["rng_cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng_state(state: dict, device: torch.device) -> None:
    """Set the generators to a `rng_state` (loaded on any device: the states must be CPU tensors)."""
    torch.set_rng_state(state["rng_cpu"].cpu())
    if device.type == "cuda" and "rng_cuda" in state:
        torch.cuda.set_rng_state(state["rng_cuda"].cpu(), device)


def _optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    # Weight decay on matrices only: decaying norms' gains and biases only hurts.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    # fused: one kernel for all the tensors, on a CPU too (there 4× faster than the per-tensor loop, 2 ms a step)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9, fused=True)


def stop_compile_workers() -> None:
    """End the worker processes torch.compile starts to compile GPU kernels (one per core), once compiling
    is done: their start-up would otherwise take the CPU from the first training steps (tfm_lab/README.md,
    "Compile workers"). A later recompilation starts them again.
    """
    try:  # private, pinned in tests/test_torch_private_apis.py; imported here, where torch.compile was used
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:  # a PyTorch without it: the workers stay
        return
    shutdown_compile_workers()


def warm_up(forward_backward, batch: Batch, model: nn.Module, device: torch.device, passes: int = 3) -> float:
    """Run ``forward_backward(batch)`` ``passes`` times and undo it; return the seconds it took, stopping
    the compile workers included.

    Compiling (and recording CUDA graphs) happens here, off the training clock. The passes leave no trace: no
    optimizer step, the gradients dropped, the generators (dropout) rewound.
    """
    state = rng_state(device)
    model.train()
    start = time.perf_counter()
    for _ in range(passes):
        forward_backward(batch)
        model.zero_grad(set_to_none=True)
    synchronize(device)
    stop_compile_workers()
    seconds = time.perf_counter() - start
    restore_rng_state(state, device)
    return seconds


def reached_for_good(evals: list[dict], threshold: float, key: str = "time_s") -> float | None:
    """``key`` (the training seconds, or "step") of the first evaluation from which accuracy stays
    ≥ threshold; None if the last one is below it."""
    reached = None
    for e in evals:
        if e["accuracy"] >= threshold:
            reached = e[key] if reached is None else reached
        else:
            reached = None
    return reached


def _save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a crash mid-write never leaves a broken checkpoint


def export_model(path: str | Path, model: nn.Module, model_config: TransformerConfig, cfg: TrainConfig,
                 summary: dict) -> None:
    """Write a small file with what `tfm_lab.pretrained` needs: the config, the weights (float16,
    half the size; loading casts them back to float32), the task and the run's summary."""
    state = {k: v.detach().cpu().half() if v.is_floating_point() else v.detach().cpu()
             for k, v in model.state_dict().items()}
    _save(Path(path), {"model_config": asdict(model_config), "state_dict": state, "task": cfg.task,
                       "task_args": cfg.task_args, "train_config": asdict(cfg), "summary": summary})


def train(cfg: TrainConfig | None = None, **overrides) -> dict:
    """Train, evaluate, checkpoint; return the history.

    Args:
        cfg: the run's settings; ``overrides`` replace some of its fields (``train(steps=50)``).
    Returns:
        dict with ``config`` (the TrainConfig as a dict), ``model_config``, ``evals`` (a list
        of {step, time_s, accuracy, eval_loss, examples}), ``losses`` (a list of {step, loss, lr}),
        ``summary`` (task, steps, accuracy, loss, tokens_per_s, …) and, not JSON, ``model``.
    Raises:
        SettingsError: bad settings, no such device, an unwritable ``out``, or a checkpoint made with
        another task or model — all found before the first step.
    """
    cfg = replace(cfg or TrainConfig(), **overrides)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed and not dist.is_initialized():
        backend = "nccl" if cfg.device != "cpu" and torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    if cfg.batch_size % world:
        raise SettingsError(f"batch_size {cfg.batch_size} is not divisible by the {world} data-parallel ranks")
    device = pick_device(cfg.device, int(os.environ.get("LOCAL_RANK", "0")))
    dtype = autocast_dtype(cfg.precision, device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 leftovers (the loss, the optimizer) on tensor cores
    out = Path(cfg.out) if cfg.out else None
    if out is not None:
        check_writable_folder(out)  # now, not when the first checkpoint is due

    model_options = dict(cfg.model)
    if device.type == "cpu":
        model_options.setdefault("attn_impl", "eager")  # at these lengths PyTorch's fused CPU kernel is slower
    try:
        task = make_task(cfg.task, **cfg.task_args)
        torch.manual_seed(cfg.seed)  # same initial weights on every rank
        model, model_config = build_model(task, model_options)
    except ValueError as error:
        raise SettingsError(f"task {cfg.task}: {error}") from None
    model.to(device)
    optimizer = _optimizer(model, cfg, device)
    history = {"config": asdict(cfg), "model_config": asdict(model_config), "evals": [], "losses": []}
    start_step, train_time, tokens_seen = 0, 0.0, 0

    checkpoint = out / "checkpoint.pt" if out is not None else None
    if cfg.resume and checkpoint.exists():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if _weights_config(state["model_config"]) != _weights_config(history["model_config"]) \
                or state["config"]["task"] != cfg.task:
            raise SettingsError(f"{checkpoint} was made with another task or model; use a new --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng_state(state, device)
        start_step, train_time, tokens_seen = state["step"], state["train_time"], state["tokens"]
        history["evals"], history["losses"] = state["evals"], state["losses"]

    trained = model
    if distributed:
        trained = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    loss_sum_of = token_loss_sum
    # compiled, one pass per step unless asked: trimmed groups change width from step to step
    length_buckets = cfg.length_buckets or (2 if device.type == "cpu" and dtype is None and not cfg.compile else 1)
    if cfg.compile:
        # groups of varying width share one graph (dynamic), compiled in `warm_up`, not once per width on the clock
        trained = torch.compile(trained, mode=cfg.compile_mode, dynamic=True if length_buckets > 1 else None)
        loss_sum_of = torch.compile(token_loss_sum, mode=cfg.compile_mode)
    eval_data = task.eval_set(cfg.eval_size).to(device)
    full_eval = eval_chunks(eval_data, device)
    eval_sets = {"full": full_eval,
                 "quick": eval_chunks(eval_data[:cfg.quick_eval_size], device) if cfg.quick_eval_size else full_eval}
    per_rank = cfg.batch_size // world

    def save_checkpoint(step: int) -> None:
        if rank == 0:
            _save(checkpoint, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                               "train_time": train_time, "tokens": tokens_seen, **rng_state(device),
                               "config": asdict(cfg), "model_config": asdict(model_config),
                               "evals": history["evals"], "losses": history["losses"]})

    def forward_backward(batch: Batch) -> torch.Tensor:
        """This rank's share of ``batch``: forward, loss, backward (the gradients accumulate).
        Returns its share of the batch's mean token loss (detached, on the device: no sync)."""
        parts = batch[rank * per_rank:(rank + 1) * per_rank].by_source_length(length_buckets)
        n_scored = int((batch.target != IGNORE_INDEX).sum())
        loss_total = torch.zeros((), device=device)
        for i, part in enumerate(parts):
            part = part.to(device, non_blocking=True)
            # DDP averages the gradients over ranks once, after the last part's backward
            syncing = not distributed or i == len(parts) - 1
            with nullcontext() if syncing else trained.no_sync():
                with autocast(device, dtype):
                    logits = model_logits(trained, part)  # (B, T, V)
                loss_sum = loss_sum_of(logits, part.target, cfg.label_smoothing)
                # DDP averages over ranks; scaling by world / global count makes that the global mean.
                (loss_sum * (world / n_scored)).backward()
            loss_total += loss_sum.detach()
        return loss_total / n_scored

    compile_seconds = 0.0
    if cfg.compile and start_step < cfg.steps:  # compile now, on the first batch, not on the clock
        compile_seconds = warm_up(forward_backward, task.batch_for_step(start_step, cfg.batch_size, cfg.seed),
                                  model, device)

    bar = tqdm(total=cfg.steps, initial=start_step, desc=f"train {cfg.task}", disable=not cfg.progress or rank > 0,
               dynamic_ncols=True)
    running = torch.zeros((), device=device)  # loss summed since the last log, kept on the device: no sync per step
    since_log = 0
    model.train()
    tick = time.perf_counter()
    for step in range(start_step, cfg.steps):
        lr = lr_at(step, cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = task.batch_for_step(step, cfg.batch_size, cfg.seed)  # the same global batch on every rank
        running += forward_backward(batch)
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens_seen += batch.n_tokens
        bar.update(1)

        since_log += 1
        done = step + 1
        last = done == cfg.steps
        stopping = done == cfg.stop_after and not last
        evaluate_now = done % cfg.eval_every == 0 or last
        scheduled_save = done % cfg.checkpoint_every == 0 if cfg.checkpoint_every else evaluate_now
        save_now = checkpoint is not None and (scheduled_save or last or stopping)
        pausing = evaluate_now or save_now or stopping
        if done % cfg.log_every == 0 or pausing:  # so that a checkpoint leaves nothing unlogged
            if distributed:
                dist.all_reduce(running)  # each rank holds its share of the mean
            logged, since_log = running.item() / since_log, 0
            running.zero_()
            history["losses"].append({"step": done, "loss": logged, "lr": lr})
            bar.set_postfix(loss=f"{logged:.4f}")
        if pausing:  # the clock stops: evaluating and saving are not training
            synchronize(device)
            train_time += time.perf_counter() - tick
        if evaluate_now:
            examples = eval_sets["full" if last else "quick"]
            accuracy, eval_loss = _evaluate(model, examples, device, dtype)
            history["evals"].append({"step": done, "time_s": train_time, "accuracy": accuracy, "eval_loss": eval_loss,
                                     "examples": sum(len(part) for part in examples)})
            bar.set_postfix(loss=f"{history['losses'][-1]['loss']:.4f}", acc=f"{accuracy:.4f}")
        if save_now:
            save_checkpoint(done)
        if pausing:
            tick = time.perf_counter()
        if stopping:
            break
    bar.close()

    last_eval = history["evals"][-1] if history["evals"] else {"accuracy": None}
    history["summary"] = {
        "task": cfg.task, "steps": history["losses"][-1]["step"] if history["losses"] else 0, "accuracy": last_eval["accuracy"],
        "loss": history["losses"][-1]["loss"] if history["losses"] else None,
        "tokens_per_s": tokens_seen / max(train_time, 1e-9), "train_seconds": train_time,
        "seconds_to_99": reached_for_good(history["evals"], 0.99),
        "seconds_to_999": reached_for_good(history["evals"], 0.999),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": "bf16" if dtype is not None else "fp32", "threads": torch.get_num_threads(),
        "length_buckets": length_buckets, "world_size": world, "compiled": cfg.compile,
        "compile_mode": cfg.compile_mode if cfg.compile else None, "compile_seconds": compile_seconds,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if out is not None and rank == 0:
        (out / "history.json").write_text(json.dumps({k: v for k, v in history.items() if k != "model"}, indent=1))
    history["model"] = model
    return history


def _weights_config(model_config: dict) -> dict:
    """What a checkpoint's weights depend on: the model config but the attention path."""
    return {k: v for k, v in model_config.items() if k != "attn_impl"}


# TrainConfig fields the CLI sets one to one, with their types.
_TRAIN_ARGS = (("steps", int), ("batch_size", int), ("length_buckets", int), ("lr", float), ("warmup", int),
               ("min_lr_ratio", float), ("weight_decay", float), ("label_smoothing", float), ("grad_clip", float),
               ("eval_every", int), ("eval_size", int), ("quick_eval_size", int), ("log_every", int),
               ("checkpoint_every", int), ("stop_after", int), ("seed", int), ("threads", int))
# TransformerConfig fields the CLI can override (the integers first).
_MODEL_ARGS = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "max_len", "dropout", "attn_impl")


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m tfm_lab.train", description=__doc__.split("\n\n")[0],
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TrainConfig()
    p.add_argument("--task", choices=sorted(TASKS), default=defaults.task)
    for name, kind in _TRAIN_ARGS:
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=getattr(defaults, name))
    p.add_argument("--schedule", choices=SCHEDULES, default=defaults.schedule,
                   help="cosine: warmup then cosine decay; noam: the 2017 schedule, peaking at --lr")
    p.add_argument("--precision", choices=PRECISIONS, default=defaults.precision,
                   help="auto: bf16 autocast where the device has bf16 units (GPUs from Ampere on, CPUs with "
                        "AVX-512 BF16 or AMX), else fp32")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--out", help="folder for checkpoint.pt and history.json")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt if it exists")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (compiled before the clock starts; the summary's compile_seconds)")
    p.add_argument("--compile-mode", choices=COMPILE_MODES,
                   help="torch.compile's mode, implies --compile (reduce-overhead: CUDA graphs on a GPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--export", help="also write a small model file (config + weights) here, e.g. "
                                    "tfm_lab/checkpoints/date_model.pt")
    for name in _MODEL_ARGS[:-2]:
        p.add_argument("--" + name.replace("_", "-"), type=int, help=f"model {name} (default: TASK_MODELS)")
    p.add_argument("--dropout", type=float, help="model dropout (default: TASK_MODELS)")
    p.add_argument("--attn-impl", choices=["sdpa", "eager"],
                   help="attention path (default: eager on a CPU, else sdpa)")
    p.add_argument("--n-digits", type=int, help="digits per operand (copy, reverse, sort, addition)")
    return p


def main(argv: list[str] | None = None) -> dict:
    """The CLI: train, then print the summary as the last line of stdout (JSON).

    Bad settings print one line, ``python -m tfm_lab.train: error: …``, and exit with status 2.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    model = {name: getattr(args, name) for name in _MODEL_ARGS if getattr(args, name) is not None}
    task_args = {} if args.n_digits is None else {"n_digits": args.n_digits}
    try:
        cfg = TrainConfig(
            task=args.task, **{name: getattr(args, name) for name, _ in _TRAIN_ARGS}, schedule=args.schedule,
            precision=args.precision, device=args.device, compile=args.compile or args.compile_mode is not None,
            compile_mode=args.compile_mode or "default", out=args.out, resume=args.resume,
            progress=not args.no_progress, model=model, task_args=task_args,
        )
        if args.export:
            check_writable_folder(Path(args.export).parent)
        history = train(cfg)
    except SettingsError as error:
        parser.error(str(error))
    rank = dist.get_rank() if dist.is_initialized() else 0
    if args.export and rank == 0:
        export_model(args.export, history["model"], TransformerConfig(**history["model_config"]), cfg,
                     history["summary"])
    if rank == 0:
        print(json.dumps(history["summary"]), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()
    return history


if __name__ == "__main__":
    main()
