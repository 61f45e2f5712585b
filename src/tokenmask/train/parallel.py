"""Data-parallel training: what the processes share and how they stay in step.

A run is one process, or several started by ``accelerate launch`` or ``torchrun`` (DDP; FSDP
through an Accelerate config). Each process trains on its own slice of every global batch
(:class:`~tokenmask.collate.stream.MicroBatches`); the loss of a step is divided by the number of
targets in all processes together; the numbers the loop decides on (loss, tokens, time, stop
requests) are summed across processes, so every process takes the same decisions. Also here:
the one Accelerator of a run, on the device and precision asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from accelerate.utils import ProjectConfiguration
from torch import nn

from tokenmask.collate.stream import Shard


class LossModule(nn.Module):
    """``model`` with ``loss(model, batch)`` as its forward.

    DDP and FSDP act in ``forward`` (gradient hooks, gathering sharded weights), but the sparse
    MLM head calls the encoder and the head directly; wrapping the whole loss as a forward
    keeps them in charge. ``module.model`` is the model itself.
    """

    def __init__(self, model: nn.Module, loss: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.loss(self.model, batch)


def summed(accelerator: Accelerator, values: Sequence[float]) -> list[float]:
    """``values`` summed over all processes (float64); unchanged in a single process.

    To share a number only the main process has (its clock), the others pass 0.
    """
    if accelerator.num_processes == 1:
        return [float(v) for v in values]
    tensor = torch.tensor(list(values), dtype=torch.float64, device=accelerator.device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def rng_state() -> dict[str, torch.Tensor]:
    """This process's random state (CPU, and the current GPU's): dropout draws from it."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def gathered(accelerator: Accelerator, value: Any) -> list[Any]:
    """Every process's ``value`` (picklable), in rank order (a collective: all processes call it)."""
    if accelerator.num_processes == 1:
        return [value]
    values: list[Any] = [None] * accelerator.num_processes
    dist.all_gather_object(values, value)
    return values


def gathered_rng_states(accelerator: Accelerator) -> list[dict[str, torch.Tensor]]:
    """Every process's :func:`rng_state`, in rank order (a collective: all processes call it)."""
    return gathered(accelerator, rng_state())


def restore_rng_state(states: list[dict[str, torch.Tensor]], rank: int) -> bool:
    """Set this process's random state from a checkpoint's; False when it holds none for ``rank``
    (the run had fewer processes), which leaves the state as seeded."""
    if rank >= len(states):
        return False
    torch.set_rng_state(states[rank]["cpu"])
    if "cuda" in states[rank] and torch.cuda.is_available():
        torch.cuda.set_rng_state(states[rank]["cuda"])
    return True


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' -> 'bf16' where the hardware computes in bf16 natively, else 'fp32'.

    On CPUs without AMX or AVX512-BF16, bf16 autocast is emulated and slower than fp32.
    """
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if device.type == "cpu":
        # private probes of torch.cpu, not in every release since the torch floor: missing -> fp32
        probes = (getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"))
        return "bf16" if any(probe is not None and probe() for probe in probes) else "fp32"
    return "fp32"


def make_accelerator(*, precision: str, cpu: bool, trackers: Sequence[str] = (), output: Path | None = None) -> Accelerator:
    """An Accelerator for this run (one per run: the process-wide state is reset first).

    ``trackers``: Accelerate's trackers to log to (installed ones, see
    :mod:`tokenmask.train.trackers`), TensorBoard's files under ``output/tensorboard``.

    ``precision``: 'auto', 'bf16', 'fp16' (GPUs only: autocast with a gradient scaler) or
    'fp32' (:func:`resolve_precision`); ``cpu``: ignore GPUs.

    Raises:
        ValueError: a launch this loop cannot train correctly: FSDP or DeepSpeed (not supported
            yet), or processes that Accelerate did not join into one group; fp16 without a GPU.
    """
    AcceleratorState._reset_state()
    device = torch.device("cuda") if torch.cuda.is_available() and not cpu else torch.device("cpu")
    precision = resolve_precision(precision, device)
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("--precision fp16 trains with a gradient scaler on a GPU; on a CPU choose bf16 or fp32")
    project = None if output is None else ProjectConfiguration(project_dir=str(output), logging_dir=str(output / "tensorboard"))
    accelerator = Accelerator(
        cpu=cpu,
        mixed_precision=precision if precision in ("bf16", "fp16") else "no",
        log_with=list(trackers) or None,
        project_config=project,
    )
    kind = accelerator.distributed_type.value
    if kind in ("FSDP", "DEEPSPEED"):
        raise ValueError(
            f"{kind} is not supported yet: launch plain data parallelism (accelerate launch --multi_gpu, or torchrun)"
        )
    launched = Shard.from_environment().world
    if launched != accelerator.num_processes:
        raise ValueError(
            f"launched as {launched} processes, but Accelerate set up {accelerator.num_processes} "
            f"({kind}): with accelerate launch, FSDP and DeepSpeed need GPUs; on CPUs launch with torchrun"
        )
    return accelerator
