"""The optimizer step's skip rule, with and without the fp16 gradient scaler (on the CPU)."""

from __future__ import annotations

import math

import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from tokenmask.train.parallel import make_accelerator
from tokenmask.train.step import optimizer_step


def prepared(scaler: torch.amp.GradScaler | None):
    """A one-layer model and its optimizer prepared by a CPU Accelerator, with ``scaler`` as
    Accelerate would attach it on a GPU (``torch.amp.GradScaler`` runs on the CPU too)."""
    AcceleratorState._reset_state()
    accelerator = Accelerator(cpu=True)
    accelerator.scaler = scaler  # before prepare: the wrapped optimizer steps through it
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = accelerator.prepare(torch.optim.SGD(model.parameters(), lr=0.1))
    return accelerator, model, optimizer


def step(accelerator, model, optimizer):
    loss = model(torch.ones(2, 4)).pow(2).sum()
    accelerator.backward(loss)  # scaled by the scaler when there is one
    norm = float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]))
    return optimizer_step(accelerator, optimizer, float(loss.detach()), norm)


def test_without_a_scaler_a_non_finite_step_is_skipped_and_bad():
    accelerator, model, optimizer = prepared(None)
    before = model.weight.detach().clone()
    assert step(accelerator, model, optimizer) == (True, False)
    assert not torch.equal(model.weight, before)
    assert optimizer_step(accelerator, optimizer, math.nan, 1.0) == (False, True)
    assert optimizer_step(accelerator, optimizer, 1.0, math.inf) == (False, True)


def test_with_a_scaler_an_overflow_is_skipped_by_the_scaler_and_not_bad():
    # 2^127 times the loss overflows float32: the scaler skips the step and halves its scale.
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127, growth_interval=1000)
    accelerator, model, optimizer = prepared(scaler)
    before = model.weight.detach().clone()
    assert step(accelerator, model, optimizer) == (False, False)
    assert torch.equal(model.weight, before), "a skipped step changed the weights"
    assert scaler.get_scale() == 2.0**126
    optimizer.zero_grad()
    scaler.update(2.0**10)  # a scale that fits: the next step goes through, unscaled
    assert step(accelerator, model, optimizer) == (True, False)
    assert not torch.equal(model.weight, before)


def test_fp16_is_refused_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: fp16 is allowed")
    with pytest.raises(ValueError, match="fp16 trains with a gradient scaler on a GPU"):
        make_accelerator(precision="fp16", cpu=True)
