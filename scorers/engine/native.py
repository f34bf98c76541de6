"""``divergence.c``, the distributional statistics' fused CPU kernel: built once per machine into the cache,
loaded with ctypes, run over row ranges in threads. Without it (no compiler, a failed build, or
``CSCORE_NATIVE=0``) ``divergence`` runs its torch kernel: same numbers to ~1e-15, slower."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

import torch

from cscore.files import cache_root, file_lock
from cscore.scorers.engine.cpu import cpu_flags

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("divergence.c")
FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno", "-fno-trapping-math",
         "-fassociative-math", "-fno-signed-zeros", "-fopenmp-simd", "-fPIC", "-shared", "-Wl,-z,now"]
I64 = ctypes.POINTER(ctypes.c_int64)
F64 = ctypes.POINTER(ctypes.c_double)


class Spec(ctypes.Structure):
    _fields_ = [*((name, ctypes.c_int64) for name in ("heads", "n_t", "n_g", "x", "n_o", "vocab")),
                *((name, F64 if name == "base" else I64)
                  for name in ("ptr", "width", "stride", "first", "bf16", "base", "group", "power", "others"))]


def cache_dir() -> Path:
    """``CSCORE_NATIVE_DIR``, else native/ in cscore's cache."""
    return Path(os.environ.get("CSCORE_NATIVE_DIR") or cache_root() / "native")


@functools.cache
def library() -> ctypes.CDLL | None:
    """The built kernel, or None (logged once)."""
    if os.environ.get("CSCORE_NATIVE", "1") == "0":
        return None
    compiler = shutil.which(os.environ.get("CC", "gcc"))
    if compiler is None:
        log.warning("no C compiler (gcc, or $CC): the distributional statistics run the torch kernel instead")
        return None
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
        cpu = f"{platform.machine()} {platform.processor()} {' '.join(sorted(cpu_flags()))}"  # what -march=native reads
        key = hashlib.sha256("\0".join([SOURCE.read_text(), *FLAGS, version, cpu]).encode()).hexdigest()
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        built = folder / f"divergence-{key[:20]}.so"
        with file_lock(folder / f"{built.name}.lock"):
            if not built.exists():
                build(compiler, built)
        lib = ctypes.CDLL(str(built))
    except (OSError, subprocess.SubprocessError, RuntimeError) as err:
        log.warning("the native distributional kernel is unavailable (%s): the torch kernel runs instead", err)
        return None
    lib.stats.argtypes = [ctypes.POINTER(Spec), ctypes.c_int64, ctypes.c_int64, *[F64] * 6]
    lib.stats.restype = ctypes.c_int
    return lib


def build(compiler: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        done = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(out), "-lm"], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
        os.replace(out, target)


def usable(blocks: dict[str, list[torch.Tensor]]) -> bool:
    """Whether the kernel can read these logits: CPU tensors of float32 or narrower floats."""
    return all(z.device.type == "cpu" and z.dtype in (torch.float32, torch.bfloat16, torch.float16)
               for b in blocks.values() for z in b) and library() is not None


def as_i64(values: Iterable[int]) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int64)


def statistics(blocks: list[list[torch.Tensor]], plan: list[tuple[float, dict[int, list[int]]]], n_t: int,
               x: int | None, others: list[int]) -> dict[str, torch.Tensor]:
    """The kernel's sums for the heads' column blocks under ``divergence.groups``' ``plan``: mx [n, H];
    S, de [n, n_t, H]; xo, ox, wl [n, n_t, n_o]."""
    lib = library()
    assert lib is not None
    heads = [[z if z.dtype in (torch.float32, torch.bfloat16) and z.stride(-1) == 1 else z.float().contiguous()
              for z in b] for b in blocks]
    flat = [z for b in heads for z in b]
    n, n_o = flat[0].shape[0], len(others)
    group, power = [0] * n_t, [1] * n_t
    for g, (_, powers) in enumerate(plan):
        for k, js in powers.items():
            for j in js:
                group[j], power[j] = g, k
    keep = {"ptr": as_i64(z.data_ptr() for z in flat), "width": as_i64(z.shape[1] for z in flat),
            "stride": as_i64(z.stride(0) for z in flat), "bf16": as_i64(int(z.dtype == torch.bfloat16) for z in flat),
            "first": as_i64([0, *torch.tensor([len(b) for b in heads]).cumsum(0).tolist()]),
            "base": torch.tensor([b for b, _ in plan], dtype=torch.float64), "group": as_i64(group),
            "power": as_i64(power), "others": as_i64(others or [0])}
    spec = Spec(len(heads), n_t, len(plan), x if x is not None else 0, n_o, sum(z.shape[1] for z in heads[0]),
                **{k: ctypes.cast(t.data_ptr(), F64 if k == "base" else I64) for k, t in keep.items()})
    shapes = {"mx": (n, len(heads)), "S": (n, n_t, len(heads)), "de": (n, n_t, len(heads)),
              **dict.fromkeys(("xo", "ox", "wl"), (n, n_t, n_o))}  # in the kernel's argument order
    out = {k: torch.empty(shape, dtype=torch.float64) for k, shape in shapes.items()}
    ptrs = [ctypes.cast(t.data_ptr(), F64) for t in out.values()]
    parts = max(1, min(n, torch.get_num_threads()))
    bounds = [(n * p // parts, n * (p + 1) // parts) for p in range(parts)]

    def run(bound: tuple[int, int]) -> int:
        return lib.stats(ctypes.byref(spec), bound[0], bound[1], *ptrs)

    if parts == 1:
        codes = [run(bounds[0])]
    else:
        with ThreadPoolExecutor(parts) as pool:
            codes = list(pool.map(run, bounds))
    if any(codes):
        raise MemoryError("the native distributional kernel could not allocate its buffers")
    del heads, keep  # kept alive until the kernel is done
    return out
