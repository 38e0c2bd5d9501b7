"""Time per training step of the LMU, its LTI loop, the parallel LMU and an LSTM vs n (Fig. 3.2).

The book's reproduction of Fig. 3.2 of Chilkuri's thesis (spec lmu §3). One training step is
forward + loss + backward + ``Adam.step()`` on one batch. At every sequence length n the four
contenders are timed side by side with :func:`rnnbook.timing.compare` (interleaved rounds,
medians), so the *ratios* hold even on a machine shared with other jobs:

* ``original``: the original LMU (3.15)-(3.17), ``LMUCell`` looped by ``Recurrent``;
* ``lti``: the parallel model's weights with its delay network run as a loop (3.19),
  ``ParallelLMU(mode="recurrent")``, the thesis's "LTI version";
* ``parallel``: the same model without a loop, ``mode="final"`` (3.25) when only the last
  state is needed and ``mode="fft"`` (3.26) for sequences;
* ``lstm``: a one-layer ``torch.nn.LSTM`` whose hidden size makes its parameter count (with
  the same read-out) closest to the parallel model's (cuDNN with ``--device cuda``).

Two settings, with the thesis's model sizes (spec lmu §2.1, §4.1, §4.2):

* ``psmnist``: classification from the final state, one pixel per step, theta = n, batch 100;
  original LMU d = 256, d_h = 212 (102,027 parameters); parallel d = 468, d_o = 346 and a
  10-way read-out (166,092 parameters). Random pixels and labels: the time does not depend on
  the data.
* ``mackey-glass``: sequence to sequence (return_sequences=True), a loss at every step
  (predict the input 15 steps ahead), batch 16; parallel d = 40, theta = 50, d_o = 140, then
  Linear(140, 80), ReLU, Linear(80, 1) (17,243 parameters). The original LMU (d = 40,
  theta = 50) and the LSTM get the same head and a hidden size matched to 17,243 parameters
  (the thesis's 64x is against "a parameter-matched 1-layer LMU"). The series is random noise.

Nothing here asserts a time. The script does check what can fail: the thesis's parameter
counts, the parallel and loop models giving the same loss with the same weights (to 1e-4, at
the smallest n), and finite losses for every contender at every n.

Denormals: with only the last state in the loss, the gradients that flow back through a long
sequence shrink into subnormal floats, which x86 CPUs process ~10-100x slower; nn.LSTM's
backward at n = 256 took 10x longer here because of it. GPUs do not pay this, so by default
the script flushes subnormals to zero (``torch.set_flush_denormal``); ``--keep-denormals``
times the slow path. The JSON records which.

Usage: ``.venv/bin/python benchmarks/bench_lmu.py`` (about 5 minutes on a 2-core CPU at one
thread; writes ``_build/bench/lmu.json``, or with ``--record`` the book's record
``results/lmu.json``), ``--quick`` (a small sweep in under a minute, not saved unless
``--output`` is given), ``--device cuda`` (writes ``lmu_cuda.json``).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from timing import RECORD_HELP, save
from torch import nn

from rnnbook.models import LMUCell, ParallelLMU, Recurrent
from rnnbook.timing import compare

CONTENDERS = {  # key in the JSON -> label in the table (the thesis's names)
    "original": "LMU (original)",
    "lti": "LTI (loop)",
    "parallel": "parallel",
    "lstm": "LSTM",
}
THESIS_CLAIMS = {
    "hardware": "one GTX 1080 (spec lmu §3)",
    "psmnist_n784_original_over_parallel": 220,
    "mackey_glass_n5000_original_over_parallel": 64,
    "psmnist_cudnn_lstm_over_parallel": 34,
    "mackey_glass_4layer_lmu_over_parallel": 200,
}
# The full sweep (n, rounds, warmup): fewer rounds where every call takes seconds.
FULL = {
    "psmnist": [
        (64, 9, 2),
        (128, 9, 2),
        (256, 9, 2),
        (512, 7, 1),
        (784, 7, 1),
        (1024, 7, 1),
        (2048, 5, 1),
    ],
    "mackey-glass": [
        (64, 9, 2),
        (128, 9, 2),
        (256, 9, 2),
        (512, 7, 1),
        (1024, 7, 1),
        (2048, 5, 1),
        (5000, 5, 1),
    ],
}
QUICK = {
    "psmnist": [(64, 3, 1), (128, 3, 1), (256, 3, 1)],
    "mackey-glass": [(64, 3, 1), (256, 3, 1), (1024, 3, 1)],
}
BATCH = {"psmnist": 100, "mackey-glass": 16}
QUICK_BATCH = {"psmnist": 32, "mackey-glass": 8}
# Thesis reconstructions (spec lmu §2.1, §4.1, §4.2): if the models change, these fail.
EXPECTED_PARAMS = {
    ("psmnist", "original"): 102_027,
    ("psmnist", "parallel"): 166_092,
    ("mackey-glass", "parallel"): 17_243,
}
MG_HORIZON = 15  # Mackey-Glass: predict 15 steps ahead


def n_params(*modules: nn.Module) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


def lstm_count(d_x: int, h: int) -> int:
    """nn.LSTM's parameters: four gates, each with W_ih, W_hh and two biases."""
    return 4 * h * (d_x + h) + 8 * h


def lmu_count(d_x: int, h: int, d: int) -> int:
    """LMUCell's parameters: e_x, e_h, e_m, W_x, W_h, W_m."""
    return d_x + h + d + h * d_x + h * h + h * d


def closest(count, target: int) -> int:
    """The hidden size h in 1..2048 whose ``count(h)`` is closest to ``target``."""
    return min(range(1, 2049), key=lambda h: (abs(count(h) - target), h))


class LastStep(nn.Module):
    """Read-out of the last hidden state of a Recurrent/nn.LSTM core: ``head(h_n)``."""

    def __init__(self, core: nn.Module, head: nn.Module):
        super().__init__()
        self.core, self.head = core, head

    def forward(self, x):
        return self.head(self.core(x)[0][:, -1])


class EveryStep(nn.Module):
    """Read-out of every hidden state of a Recurrent/nn.LSTM core: ``head(h_t)`` for all t."""

    def __init__(self, core: nn.Module, head: nn.Module):
        super().__init__()
        self.core, self.head = core, head

    def forward(self, x):
        return self.head(self.core(x)[0])


def mg_head(width: int) -> nn.Module:
    """The thesis's Mackey-Glass head: a dense layer of 80 units, then one output."""
    return nn.Sequential(nn.Linear(width, 80), nn.ReLU(), nn.Linear(80, 1))


def build(setting: str, n: int, parallel_mode: str, seed: int = 0) -> dict[str, nn.Module]:
    """The four contenders for ``setting`` at sequence length ``n``; lti and parallel share
    their initial weights (the parallel model is a copy of the loop model)."""
    torch.manual_seed(seed)
    if setting == "psmnist":
        theta = n
        lti = nn.Sequential(
            ParallelLMU(1, 1, 468, theta, 346, mode="recurrent"), nn.Linear(346, 10)
        )
        parallel = nn.Sequential(
            ParallelLMU(1, 1, 468, theta, 346, mode=parallel_mode), nn.Linear(346, 10)
        )
        parallel.load_state_dict(lti.state_dict())
        original = LastStep(Recurrent(LMUCell(1, 212, 256, theta)), nn.Linear(212, 10))
        target = n_params(parallel)
        h = closest(lambda h: lstm_count(1, h) + 10 * h + 10, target)
        lstm = LastStep(nn.LSTM(1, h, batch_first=True), nn.Linear(h, 10))
    else:
        d, theta = 40, 50
        lti = nn.Sequential(
            ParallelLMU(1, 1, d, theta, 140, return_sequences=True, mode="recurrent"),
            mg_head(140),
        )
        parallel = nn.Sequential(
            ParallelLMU(1, 1, d, theta, 140, return_sequences=True, mode=parallel_mode),
            mg_head(140),
        )
        parallel.load_state_dict(lti.state_dict())
        target = n_params(parallel)
        head_count = lambda h: 80 * h + 80 + 81  # noqa: E731
        h_lmu = closest(lambda h: lmu_count(1, h, d) + head_count(h), target)
        original = EveryStep(Recurrent(LMUCell(1, h_lmu, d, theta, init="uniform")), mg_head(h_lmu))
        h = closest(lambda h: lstm_count(1, h) + head_count(h), target)
        lstm = EveryStep(nn.LSTM(1, h, batch_first=True), mg_head(h))
    return {"original": original, "lti": lti, "parallel": parallel, "lstm": lstm}


def batch(setting: str, B: int, n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random inputs and targets of the right shapes: pixels and labels, or a series and the
    same series 15 steps later."""
    if setting == "psmnist":
        return torch.rand(B, n, 1, device=device), torch.randint(0, 10, (B,), device=device)
    series = torch.randn(B, n + MG_HORIZON, 1, device=device)
    return series[:, :n].contiguous(), series[:, MG_HORIZON:].contiguous()


def loss_fn(setting: str):
    return nn.functional.cross_entropy if setting == "psmnist" else nn.functional.mse_loss


def training_step(model: nn.Module, x, y, loss, losses: list):
    """One training step as a closure; every loss is kept (detached) for the finiteness check.
    On a GPU it synchronizes before returning, so that the clock reads the finished work."""
    optimizer = torch.optim.Adam(model.parameters())  # Adam with defaults, spec lmu §4

    def run():
        optimizer.zero_grad(set_to_none=True)
        value = loss(model(x), y)
        value.backward()
        optimizer.step()
        losses.append(value.detach())
        if x.is_cuda:
            torch.cuda.synchronize()

    return run


def check_params(setting: str, counts: dict[str, int]) -> None:
    for (where, who), expected in EXPECTED_PARAMS.items():
        if where == setting and counts[who] != expected:
            raise SystemExit(
                f"{setting}: the {who} model has {counts[who]:,} parameters, the thesis's "
                f"reconstruction has {expected:,} (spec lmu §2.1/§4): did the model change?"
            )


def check_same_loss(setting: str, n: int, parallel_mode: str, B: int, device) -> dict:
    """The loop (3.19) and the parallel form, with the same weights, give the same loss."""
    models = build(setting, n, parallel_mode)
    x, y = batch(setting, B, n, device)
    loss = loss_fn(setting)
    with torch.no_grad():
        loop = loss(models["lti"].to(device)(x), y).item()
        par = loss(models["parallel"].to(device)(x), y).item()
    diff = abs(loop - par)
    print(
        f"check {setting}: n={n} loss loop {loop:.6f}, {parallel_mode} {par:.6f}, |diff| {diff:.1e}"
    )
    if not diff <= 1e-4:
        raise SystemExit(
            f"{setting}: the loop and mode {parallel_mode!r} give losses {loop} and {par} with "
            f"the same weights at n={n} (|diff| {diff:.2e} > 1e-4)"
        )
    return {"n": n, "loss_loop": loop, "loss_parallel": par, "abs_diff": diff}


def run_setting(setting: str, sweep, B: int, device, max_n_original, skipped, checks):
    parallel_mode = "final" if setting == "psmnist" else "fft"
    checks[setting] = check_same_loss(setting, sweep[0][0], parallel_mode, B, device)
    rows = []
    keys = list(CONTENDERS)
    print(f"\n{setting}: batch {B}, parallel mode {parallel_mode!r}, ms per training step")
    print(
        f"{'n':>5} {'rounds':>6} "
        + " ".join(f"{CONTENDERS[k]:>15}" for k in keys)
        + f" {'orig/par':>9} {'LTI/par':>8} {'LSTM/par':>9}"
    )
    for n, rounds, warmup in sweep:
        models = build(setting, n, parallel_mode)
        counts = {k: n_params(m) for k, m in models.items()}
        check_params(setting, counts)
        x, y = batch(setting, B, n, device)
        loss = loss_fn(setting)
        losses = {k: [] for k in keys}
        contenders = {}
        for k in keys:
            if k == "original" and max_n_original is not None and n > max_n_original:
                skipped.append(
                    {
                        "setting": setting,
                        "n": n,
                        "contender": k,
                        "reason": f"--max-n-original {max_n_original}",
                    }
                )
                continue
            contenders[k] = training_step(models[k].to(device), x, y, loss, losses[k])
        times = compare(contenders, rounds=rounds, warmup=warmup)
        for k in contenders:
            values = torch.stack(losses[k])
            if not bool(torch.isfinite(values).all()):
                raise SystemExit(f"{setting}: {k} computed a non-finite loss at n={n}")
        row = {
            "setting": setting,
            "n": n,
            "theta": models["lti"][0].memory.theta,
            "batch": B,
            "rounds": rounds,
            "warmup": warmup,
            "device": str(device),
            "parallel_mode": parallel_mode,
        }
        for k in keys:
            row[k] = times.get(k)
        for k in ("original", "lti", "lstm"):
            row[f"{k}_over_parallel"] = times[k] / times["parallel"] if k in times else None
        rows.append(row)
        cells = " ".join(
            f"{times[k] * 1e3:15.1f}" if k in times else f"{'skipped':>15}" for k in keys
        )
        ratios = [row[f"{k}_over_parallel"] for k in ("original", "lti", "lstm")]
        ratio_text = " ".join(
            f"{r:{w}.1f}x" if r is not None else f"{'-':>{w + 1}}"
            for r, w in zip(ratios, (8, 7, 8))
        )
        print(f"{n:5} {rounds:6} {cells} {ratio_text}", flush=True)
    sizes = describe(setting, build(setting, sweep[0][0], parallel_mode))
    return rows, sizes


def describe(setting: str, models: dict[str, nn.Module]) -> dict:
    """Model sizes and parameter counts of a setting, for the JSON."""
    original_cell = models["original"].core.cell
    lstm = models["lstm"].core
    memory = models["parallel"][0].memory
    return {
        "original": {
            "d": original_cell.d,
            "d_h": original_cell.hidden_size,
            "theta": "n" if setting == "psmnist" else original_cell.theta,
            "init": original_cell.init,
            "params": n_params(models["original"]),
        },
        "lti_and_parallel": {
            "d": memory.d,
            "d_u": 1,
            "d_o": models["parallel"][0].d_o,
            "theta": "n" if setting == "psmnist" else memory.theta,
            "f1": "identity",
            "f2": "relu",
            "params": n_params(models["parallel"]),
        },
        "lstm": {
            "hidden_size": lstm.hidden_size,
            "params": n_params(models["lstm"]),
            "matched_to": "parallel",
        },
        "head": "Linear(w, 10) on the last state"
        if setting == "psmnist"
        else "Linear(w, 80), ReLU, Linear(80, 1) at every step",
        "loss": "cross-entropy, 10 classes"
        if setting == "psmnist"
        else f"MSE against the input {MG_HORIZON} steps ahead, every step",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuDNN for nn.LSTM)")
    parser.add_argument("--quick", action="store_true", help="a small sweep, under a minute")
    parser.add_argument("--setting", choices=("both", "psmnist", "mackey-glass"), default="both")
    parser.add_argument(
        "--max-n-original",
        type=int,
        default=None,
        help="skip the original LMU above this n (it is recorded as skipped)",
    )
    parser.add_argument(
        "--keep-denormals",
        action="store_true",
        help="do not flush subnormal floats to zero (slow backward passes on x86 CPUs)",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="<OUTPUT>.json; default lmu (lmu_<device> off the CPU); --quick saves "
        "only when this is given",
    )
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(1)
    flushed = False if args.keep_denormals else torch.set_flush_denormal(True)
    start = time.perf_counter()
    settings = ("psmnist", "mackey-glass") if args.setting == "both" else (args.setting,)
    sweeps = QUICK if args.quick else FULL
    batches = QUICK_BATCH if args.quick else BATCH
    rows, sizes, skipped, checks = [], {}, [], {}
    for setting in settings:
        setting_rows, sizes[setting] = run_setting(
            setting,
            sweeps[setting],
            batches[setting],
            device,
            args.max_n_original,
            skipped,
            checks,
        )
        rows.extend(setting_rows)
    total = time.perf_counter() - start
    print(
        "\nparameters: "
        + "; ".join(
            f"{s}: original {v['original']['params']:,}, parallel "
            f"{v['lti_and_parallel']['params']:,}, LSTM (h={v['lstm']['hidden_size']}) "
            f"{v['lstm']['params']:,}"
            for s, v in sizes.items()
        )
    )
    print(f"skipped: {skipped or 'nothing'}; total {total:.0f} s")
    if args.quick and args.output is None:
        print("--quick: not saved (pass --output NAME to write NAME.json)")
        return
    name = args.output or ("lmu" if device.type == "cpu" else f"lmu_{device.type}")
    path = save(name, rows, record=args.record)
    data = json.loads(path.read_text())
    data["benchmark"] = {
        "what": "seconds per training step (forward + loss + backward + Adam step on one "
        "batch), median of interleaved rounds (rnnbook.timing.compare)",
        "contenders": CONTENDERS,
        "settings": sizes,
        "quick": args.quick,
        "flush_denormal": bool(flushed),
        "checks": checks,
        "skipped": skipped,
        "total_seconds": total,
        "thesis_claims": THESIS_CLAIMS,
    }
    path.write_text(json.dumps(data, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
