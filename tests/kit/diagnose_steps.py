"""Steps written as users write them, each with one cause planted at the line marked `# PLANT: <kind>` (the tests
of perflab.kit.diagnose find the line by its mark), and clean steps that must get no host sync or recompile."""
import time

import torch
import torch.nn.functional as F

from perflab.kit.compiles import compile_kwargs
from perflab.kit.cudagraphs import tracked, uses_cudagraphs

x = torch.randn(256, 32)
w = torch.randn(32, 32, requires_grad=True)
labels = torch.randint(0, 4, (256,))


def sync_step():
    y = torch.tanh(x @ w)
    loss = y.pow(2).mean()
    loss.backward()
    w.grad = None
    return loss.item()  # PLANT: host sync


def mask_step():
    y = x @ w
    picked = y[labels == 2]  # PLANT: host sync, mask
    return picked.sum()


def copy_step():
    scale = torch.tensor([0.5, 2.0], device=x.device)  # PLANT: host-to-device copy
    return (x[:, :2] * scale).sum()


def loop_step():
    y = x
    for _ in range(48):  # PLANT: Python loop of small ops
        y = y * 0.99 + 0.01
    return y.sum()


layers = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(40)])


@torch.no_grad()
def launch_step():
    return layers(x[:8]).sum()  # PLANT: launch-bound


rows = [[float(i), float(i + 1)] for i in range(64)]


def data_step():
    batch = torch.tensor(rows)  # PLANT: data loading
    return (batch @ torch.ones(2, 1)).sum()


def _shifted(t):
    return (t * 2 + 1).sum()


_compiled = torch.compile(_shifted, backend="eager", dynamic=False)
_sizes = iter(range(8, 10_000))


def recompile_step():
    return _compiled(torch.ones(next(_sizes)))  # PLANT: recompile


def _with_print(t):
    t = t * 2
    print("", end="")  # PLANT: graph break
    return t + 1


_broken = torch.compile(_with_print, backend="eager")


def graph_break_step():
    return _broken(x)


class _Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.ones(4)


_loader = iter(torch.utils.data.DataLoader(_Slow(), batch_size=4, num_workers=0))


def loader_step():
    batch = next(_loader)  # PLANT: data loading, loader
    return batch.sum()


def lifetime_setup():
    """A step compiled for CUDA graphs (reduce-overhead), whose last output is read after the next replay."""
    kw = compile_kwargs("reduce-overhead", "eager")
    double = torch.compile(lambda t: t * 2, **kw)
    fn = tracked(double) if uses_cudagraphs("reduce-overhead", "eager", "cpu") else double
    kept = {}

    def step():
        out = fn(x)
        if "last" in kept:
            kept["last"].sum()  # PLANT: CUDA-graph lifetime
        kept["last"] = out
        return out
    return step


model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters())


def clean_step():
    """A training step with nothing read on the host (Adam's own step counters are host tensors: no device sync)."""
    loss = F.cross_entropy(model(x), labels)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


_clean_compiled = torch.compile(lambda t: torch.relu(t @ w.detach()).sum(), backend="eager", dynamic=False)


def clean_compiled_step():
    """A compiled call at one shape: compiled once in the warm-up, no recompile after."""
    return _clean_compiled(x)


def raising_step():
    y = x @ w
    raise ValueError(f"planted: {tuple(y.shape)}")  # PLANT: raises


def slow_step():
    time.sleep(0.3)
    return x.sum()
