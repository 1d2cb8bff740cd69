"""Data for the probe study: a seeded generator of SAE-like activations with one-hot patch labels, a
loader (and writer) for the original on-disk format, and the input checks every solver runs.

    x, y = make_activations(n_rows=4096, n_latents=512, n_classes=32, l0=32, seed=0)
    x      # torch.sparse_csr (n_rows, n_latents) float32, int64 row pointers
    y      # (n_rows, n_classes) uint8 one-hot

The generator mimics what the research note reports of the real data (ADE20K patches through a sparse
autoencoder): about `l0` active latents per row drawn from a heavy-tailed latent popularity, magnitudes
log-normal with median ~0.8 and a max near 80, a share of latents that never fire, and some latents
that fire much more often (and harder) on one class. It draws on the CPU with a seeded torch.Generator,
so the same seed gives the same data on every machine, then moves the result to `device`.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import torch

__all__ = ["make_activations", "save_dataset", "load_dataset", "DataSource", "as_csr", "as_labels", "check_inputs",
           "csr_to_dense", "make_csr"]


def make_csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, shape) -> torch.Tensor:
    """torch.sparse_csr_tensor without the per-call invariant check and the "beta" warning: every caller
    here builds crow/col from sorted offsets, so the check would only cost time."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, col, values, tuple(shape), check_invariants=False)


def make_activations(n_rows: int, n_latents: int, n_classes: int, l0: float = 32.0, *, seed: int = 0,
                     frac_empty: float = 0.05, frac_informative: float = 0.25, boost: float = 40.0,
                     value_median: float = 0.8, value_sigma: float = 0.95, value_max: float = 84.0,
                     device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """SAE-like sparse activations `x` (CSR, n_rows x n_latents) and one-hot labels `y` (uint8)."""
    if min(n_rows, n_latents, n_classes) < 1:
        raise ValueError(f"need n_rows, n_latents, n_classes >= 1, got {n_rows}, {n_latents}, {n_classes}")
    if not 0 < l0 <= n_latents:
        raise ValueError(f"l0 (active latents per row) must be in (0, n_latents], got {l0}")
    g = torch.Generator().manual_seed(seed)
    # classes: Zipf-like frequencies (ADE20K's are very uneven), in a random order
    class_p = 1.0 / torch.arange(1, n_classes + 1, dtype=torch.float64) ** 1.1
    class_p = class_p[torch.randperm(n_classes, generator=g)]
    cls = torch.multinomial(class_p, n_rows, replacement=True, generator=g)            # [N]
    # latents: log-normal popularity, some never fire, some prefer one class
    pop = torch.exp(1.5 * torch.randn(n_latents, generator=g, dtype=torch.float64))    # [L]
    perm = torch.randperm(n_latents, generator=g)
    n_empty = min(n_latents - 1, int(round(frac_empty * n_latents)))
    n_inf = min(n_latents - n_empty, max(1, int(round(frac_informative * n_latents))))
    pop[perm[:n_empty]] = 0.0
    inf_lat = perm[n_empty:n_empty + n_inf]
    inf_cls = torch.randint(0, n_classes, (n_inf,), generator=g)
    weights = pop.expand(n_classes, n_latents).clone()                                   # [C, L]
    weights[inf_cls, inf_lat] *= boost
    cdf = torch.cumsum(weights, 1)
    cdf /= cdf[:, -1:]
    # k ~ Poisson(l0) distinct latents per row: 3k draws by inverse CDF, keep the first k distinct ones
    n_live = n_latents - n_empty
    k = torch.poisson(torch.full((n_rows,), float(l0), dtype=torch.float64), generator=g).clamp(1, n_live).long()
    n_draw = 3 * int(k.max())
    u = torch.rand(n_rows, n_draw, generator=g, dtype=torch.float64)
    idx = torch.empty(n_rows, n_draw, dtype=torch.long)
    for c in range(n_classes):  # one searchsorted per class: rows of class c share the CDF
        rows = (cls == c).nonzero().squeeze(1)
        if rows.numel():
            idx[rows] = torch.searchsorted(cdf[c], u[rows]).clamp_(max=n_latents - 1)
    srt, perm = idx.sort(dim=1, stable=True)
    first = torch.ones_like(srt, dtype=torch.bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    first = torch.zeros_like(first).scatter_(1, perm, first)                          # in draw order
    first &= torch.cumsum(first, 1) <= k[:, None]
    idx = torch.where(first, idx, n_latents).sort(1).values                            # drop the rest
    keep = idx < n_latents
    counts = keep.sum(1)
    crow = torch.zeros(n_rows + 1, dtype=torch.long)
    torch.cumsum(counts, 0, out=crow[1:])
    col = idx[keep]                                                                      # row-major, sorted per row
    row = torch.repeat_interleave(torch.arange(n_rows), counts)
    # magnitudes: log-normal (median value_median), x3 when an informative latent fires on its class
    vals = torch.exp(math.log(value_median) + value_sigma * torch.randn(col.numel(), generator=g, dtype=torch.float64))
    informative = torch.zeros(n_classes, n_latents, dtype=torch.bool)
    informative[inf_cls, inf_lat] = True
    vals = torch.where(informative[cls[row], col], 3.0 * vals, vals).clamp_(max=value_max).float()
    x = make_csr(crow, col, vals, (n_rows, n_latents))
    y = torch.nn.functional.one_hot(cls, n_classes).to(torch.uint8)
    return x.to(device), y.to(device)


# ---- the original on-disk format: scipy CSR .npz of activations + labels.bin (one uint8 class per row)

def save_dataset(folder: str | Path, x: torch.Tensor, y: torch.Tensor) -> tuple[Path, Path]:
    """Write `x` as `activations.npz` (scipy.sparse.save_npz) and the class of each row as `labels.bin`."""
    import scipy.sparse as sp

    x, y = as_csr(x), as_labels(y, x.shape[0])
    if not bool((y.sum(1) == 1).all()):
        raise ValueError("labels.bin holds one class per row: every row of y needs exactly one 1")
    if y.shape[1] > 256:
        raise ValueError(f"labels.bin is uint8: at most 256 classes, got {y.shape[1]}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    m = sp.csr_matrix((x.values().cpu().numpy(), x.col_indices().cpu().numpy(), x.crow_indices().cpu().numpy()),
                      shape=tuple(x.shape))
    acts, labels = folder / "activations.npz", folder / "labels.bin"
    sp.save_npz(acts, m)
    y.argmax(1).to(torch.uint8).cpu().numpy().tofile(labels)
    return acts, labels


def load_dataset(activations: str | Path, labels: str | Path, n_classes: int | None = None,
                 device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Read the original format: `activations` (scipy CSR .npz) and `labels` (uint8 class per row)."""
    import scipy.sparse as sp

    m = sp.load_npz(activations).tocsr()
    cls = np.fromfile(labels, dtype=np.uint8)
    if cls.shape[0] != m.shape[0]:
        raise ValueError(f"{labels}: {cls.shape[0]} labels for {m.shape[0]} activation rows")
    n_classes = int(cls.max()) + 1 if n_classes is None else n_classes
    if cls.size and int(cls.max()) >= n_classes:
        raise ValueError(f"{labels}: class {int(cls.max())} >= n_classes={n_classes}")
    x = as_csr(m)
    y = torch.nn.functional.one_hot(torch.from_numpy(cls.astype(np.int64)), n_classes).to(torch.uint8)
    return x.to(device), y.to(device)


class DataSource:
    """The notebooks' data: generated SAE-like activations, or the user's own files in the original format
    (`activations`: scipy CSR .npz, `labels`: labels.bin, one uint8 class per row), cut to a size. Relative
    paths are read from where the user ran the command (`perflab.kit.paths.user_path`), not from notebooks/."""

    def __init__(self, device, n_latents: int, l0: int, seed: int, activations: str = "", labels: str = ""):
        from ..kit.paths import user_path

        if bool(activations) != bool(labels):
            raise ValueError("give both activations (.npz) and labels (labels.bin), or neither")
        self.device, self.n_latents, self.l0, self.seed = device, n_latents, l0, seed
        self.loaded = (load_dataset(user_path(activations), user_path(labels), device=device)
                       if activations else None)
        self._cache: dict = {}

    @property
    def kind(self) -> str:
        return "your files" if self.loaded is not None else "generated"

    def get(self, n_rows: int, n_classes: int, seed_offset: int = 0):
        """(x, y) with n_rows rows and n_classes classes (the first ones of the files, capped at their size)."""
        key = (n_rows, n_classes, seed_offset)
        if key not in self._cache:
            if self.loaded is None:
                self._cache[key] = make_activations(n_rows, self.n_latents, n_classes, l0=self.l0,
                                                    seed=self.seed + seed_offset, device=self.device)
            else:
                x, y = self.loaded
                r, c = min(n_rows, x.shape[0]), min(n_classes, y.shape[1])
                crow = x.crow_indices()[:r + 1]
                end = int(crow[-1])
                self._cache[key] = (make_csr(crow, x.col_indices()[:end], x.values()[:end], (r, x.shape[1])),
                                    y[:r, :c])
        return self._cache[key]


# ---- input checks shared by every solver ------------------------------------------------------

def as_csr(x) -> torch.Tensor:
    """A torch sparse CSR tensor (float, int64 indices) from a torch CSR tensor or a scipy sparse matrix;
    anything else is refused with a message saying what was given."""
    if type(x).__module__.startswith("scipy.sparse"):
        if getattr(x, "format", None) != "csr":
            raise TypeError(f"x must be a sparse CSR matrix, got scipy.sparse format {getattr(x, 'format', '?')!r}; "
                            "convert with x.tocsr()")
        m = x
        x = make_csr(torch.from_numpy(m.indptr.astype(np.int64)), torch.from_numpy(m.indices.astype(np.int64)),
                     torch.from_numpy(np.asarray(m.data)), m.shape)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a sparse CSR matrix (torch.sparse_csr or scipy.sparse), got {type(x).__name__}")
    if x.layout != torch.sparse_csr:
        raise TypeError(f"x must be a sparse CSR tensor (layout torch.sparse_csr), got layout {x.layout}; "
                        "convert with x.to_sparse_csr()")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows x latents), got shape {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        x = x.to(torch.float32)
    if x.crow_indices().dtype != torch.int64:  # nnz > 2^31 in real data: keep 64-bit row pointers
        x = make_csr(x.crow_indices().long(), x.col_indices().long(), x.values(), x.shape)
    return x


def as_labels(y, n_rows: int) -> torch.Tensor:
    """Labels as a (n_rows, n_classes) tensor of 0/1 (any numeric or bool dtype)."""
    if isinstance(y, np.ndarray):
        y = torch.from_numpy(y)
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"y must be a (rows x classes) tensor or array of 0/1, got {type(y).__name__}")
    if y.layout != torch.strided:
        y = y.to_dense()
    if y.dim() != 2:
        raise ValueError(f"y must be 2-D (rows x classes) of 0/1, got shape {tuple(y.shape)}")
    if y.shape[0] != n_rows:
        raise ValueError(f"shape mismatch: x has {n_rows} rows but y has {y.shape[0]}")
    return y


def check_inputs(x, y) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalize and validate (x, y); raises naming the problem. One host sync per check (once per call)."""
    x = as_csr(x)
    y = as_labels(y, x.shape[0])
    if y.shape[1] < 1:
        raise ValueError("y has no classes (0 columns)")
    if not bool(torch.isfinite(x.values()).all()):
        raise ValueError("x has NaN or inf values")
    if not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("y must hold only 0 and 1 (labels outside {0, 1} found)")
    return x, y


def csr_to_dense(x: torch.Tensor) -> torch.Tensor:
    """Dense float64 copy of a CSR tensor (for the reference solver on small problems)."""
    return as_csr(x).to_dense().to(torch.float64)
