"""Does a change to the bundled kernels leave their machine code as it was?

    python -m kernel_ratchet.kernels.same_code --against HEAD~1 [--sets odd,grouped,gluon,quant]

A refactor, or a new option that the shipped configs leave off, should compile to what the
kernels compiled to before; a campaign would only measure noise. This records the Triton
launches the shipped launchers make on the chosen shape sets (dry censuses: no GPU, nothing
allocated, launchers deciding as on an H200), compiles every distinct one for sm_90 from this
checkout and from the revision ``--against`` (exported by ``git archive``, each in a fresh
process), and compares their SASS: ``nvdisasm``'s listing without addresses and encodings, so
register names, instruction order and scheduling all count. Exit 0 when every launch compiles
to the same SASS on both sides, 1 otherwise (a launch one side cannot compile included).

Sets: ``odd``, ``model`` (the dense GEMM's Linear paths, forward, backward and the FP8
blockwise step, on :data:`.gemm.bench.SHAPE_SETS`) and ``grouped`` (the bf16 and FP8 grouped
steps on the grouped campaigns' shapes; their censuses run with the warp-specialized Gluon
kernels off, so the Triton fallbacks are recorded) and ``gluon`` (each warp-specialized Gluon
kernel under every config that ships it, compiled by its launcher's ``compile_offline``: the
dense FP8 blockwise kernel, the grouped FP8 forward/dgrad, the grouped bf16 weight gradient,
and the grouped bf16 forward and dgrad where ``MM_WS`` / ``DGRAD_WS`` ship one) and ``quant``
(the dual 1x128 quantization of :mod:`.quant.dual` on the quant campaigns' shapes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import asdict
from pathlib import Path

from kernel_ratchet.kernels import offline_compile
from kernel_ratchet.kernels.census import Launch
from kernel_ratchet.kernels.offline import distinct

PACKAGE = "kernel_ratchet"
SETS = ("odd", "model", "grouped", "gluon", "quant")
#: A Gluon "launch": its kernel is ``<launcher module>.compile_offline``, its constexprs the
#: keyword arguments of that call.
OFFLINE = ".compile_offline"


def launches(sets: list[str]) -> list[Launch]:
    """The distinct launches of the shipped launchers on ``sets`` (dry censuses)."""
    import torch

    found: list[Launch] = []
    if "grouped" in sets:
        from kernel_ratchet.kernels.grouped_gemm import census as gc
        from kernel_ratchet.kernels.grouped_gemm import shapes as gs

        for shape in gs.moe_campaign():
            for kind in ("bf16", "fp8"):
                found += gc.census_step(kind, shape, gluon=False).launches
    if "gluon" in sets:
        found += gluon_launches()
    if "quant" in sets:
        found += quant_launches()
    dense = [s for s in sets if s not in ("grouped", "gluon", "quant")]
    if dense:
        from kernel_ratchet.kernels.gemm import census as dc
        from kernel_ratchet.kernels.gemm.bench import SHAPE_SETS

        for name in dense:
            for shape in SHAPE_SETS[name]():
                a, b, d = dc.inputs(shape, torch.bfloat16, "cpu")
                for fn in dc.linear_paths(a, b, d).values():
                    # Triton's launches only: the gluon set compiles the Gluon kernels
                    found += dc.census_call(fn, dry=True, gluon=False).launches
    return distinct(found)


def quant_launches() -> list[Launch]:
    """The dual 1x128 quantization (:mod:`.quant.dual`, which no Linear path of the other sets
    launches) on the quant campaigns' shapes, as on a GPU."""
    import torch

    from kernel_ratchet.kernels.census import Census
    from kernel_ratchet.kernels.quant import dual
    from kernel_ratchet.kernels.quant import launch as ql
    from kernel_ratchet.kernels.quant.shapes import quant_target

    c = Census()
    gpu = [(ql, "interpreter_mode", lambda: False)]  # the GPU's rounding variant
    with c.instrument([(dual, "_dual_quant_kernel")], gpu, dry=True):
        for shape in quant_target():
            dual.quant_fp8_dual_1x128(torch.empty(shape.M, shape.N, dtype=torch.bfloat16))
    return distinct(c.launches)


def gluon_launches() -> list[Launch]:
    """The shipped configs of the Gluon kernels, as their launchers' offline compiles."""
    from kernel_ratchet.kernels.gemm import configs as dense
    from kernel_ratchet.kernels.gemm.configs import FEW_ROWS_WGRAD, WS_CONFIGS, ws_mode
    from kernel_ratchet.kernels.grouped_gemm import configs as grouped

    def of(module: str, **kw: object) -> Launch:
        name = f"kernel_ratchet.kernels.{module}{OFFLINE}"
        return Launch(name, (), tuple(sorted(kw.items())), ())

    cols = {"b_scale_group_n": 1}  # the weight gradient's entries: one B scale per column
    out = [
        of("gemm.fp8_block_ws_launch", block_n=c.block_n, stages=c.num_stages,
           group_m=c.group_m, mode=ws_mode(c), consumers=c.block_m // 64,
           **(cols if kind.endswith("_cols") else {}))
        for kind, buckets in WS_CONFIGS.items() for c in buckets.values()
    ]  # fmt: skip
    ws16 = [(k, c) for k, b in dense.WS16_CONFIGS.items() for c in b.values()]
    ws16 += [(k, c) for k, b in dense.WS16_FITTED.items() for t in b.values() for c in t]
    out += [  # the 16-bit kinds: the forward reads B K-major, the dgrad N-major
        of("gemm.bf16_ws_launch", block_n=c.block_n, block_k=c.block_k, stages=c.num_stages,
           group_m=c.group_m, b_kmajor=kind == "bf16")
        for kind, c in ws16
    ]  # fmt: skip
    out += [
        of("grouped_gemm.fp8_ws_launch", block_n=c.BLOCK_N, stages=c.num_stages, group_m=c.GROUP_M)
        for name, c in grouped.BUCKETS.items()
        if c.gluon_ws and name.startswith("fp8_mm")
    ]
    if (w := grouped.WGRAD_WS) is not None and w.gluon_ws:
        kw = dict(block_k=w.BLOCK_K, group_n=w.GROUP_M, stages=w.num_stages)
        if w.longest_first:  # the knob an older launcher may not take: named only when set
            kw["longest_first"] = True
        out.append(of("gemm.wgrad_ws_launch", **kw))
    if (w := grouped.WGRAD_FP8_WS) is not None:  # the grouped FP8 weight gradient
        kw = dict(block_n=w.BLOCK_N, stages=w.num_stages, group_m=w.GROUP_M)
        out.append(of("grouped_gemm.wgrad_fp8_ws_launch", **kw))
    if (f := FEW_ROWS_WGRAD) is not None:  # the dense Linear's few-row weight gradient
        kw = dict(block_k=f.block_k, group_n=f.group_n, stages=f.stages)
        out.append(of("gemm.wgrad_ws_launch", **kw))
    for m, nk in ((grouped.MM_WS, True), (grouped.DGRAD_WS, False)):
        if m is not None and m.gluon_ws:
            kw = dict(block_n=m.BLOCK_N, group_m=m.GROUP_M, stages=m.num_stages)
            out.append(of("grouped_gemm.mm_ws_launch", **kw, b_is_nk=nk))
    return distinct(out)


def compiled(root: Path, xs: list[Launch], arch: int = 90) -> list[dict]:
    """Per launch, ``{"module", "sha256", "lines"}`` of its SASS compiled from the package
    under ``root``, or ``{"error"}``; in a fresh process that imports ``root``'s package."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(root)
    job = {
        "arch": arch,
        "root": str(root),
        "package": PACKAGE,
        "launches": [{"kernel": x.kernel, "launch": asdict(x)} for x in xs],
    }
    out = subprocess.run(
        [sys.executable, offline_compile.__file__],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"compiling under {root} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def exported(rev: str, dest: Path, repo: Path) -> Path:
    """The package as it was at ``rev``, written under ``dest``; ValueError for a revision git
    does not know."""
    got = subprocess.run(
        ["git", "archive", "--format=tar", rev, PACKAGE], cwd=repo, capture_output=True
    )
    if got.returncode:
        raise ValueError(f"git cannot export {rev!r}: {got.stderr.decode().strip()[:300]}")
    with tempfile.TemporaryFile() as f:
        f.write(got.stdout)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(dest, filter="data")
    return dest


def compare(xs: list[Launch], here: list[dict], there: list[dict]) -> tuple[list[str], int, int]:
    """One line per launch, the number whose SASS differs (or that only one side compiles),
    and the number neither side compiles offline (not compared)."""
    lines, differ, neither = [], 0, 0
    for x, a, b in zip(xs, here, there, strict=True):
        c = dict(x.constexprs)
        what = f"{x.kernel} {c.get('BLOCK_M')}x{c.get('BLOCK_N')}x{c.get('BLOCK_K')}"
        if x.kernel.endswith(OFFLINE):
            args = ", ".join(f"{k}={v}" for k, v in x.constexprs)
            what = f"{x.kernel.split('.')[-2]}({args})"
        if "error" in a and "error" in b:
            neither += 1
            verdict = f"not compared: neither side compiles it offline ({a['error'][:100]})"
        elif "error" in a or "error" in b:
            differ += 1
            side, err = ("here", a["error"]) if "error" in a else ("there", b["error"])
            verdict = f"DOES NOT COMPILE {side} ({err[:120]})"
        elif a["sha256"] == b["sha256"]:
            new = f"; {', '.join(b['dropped'])} new here, at their values" if b["dropped"] else ""
            moved = f"; moved from {b['module']}" if b["module"] != a["module"] else ""
            verdict = f"same SASS ({a['lines']} lines{new}{moved})"
        else:
            differ += 1
            verdict = f"DIFFERENT SASS ({b['lines']} -> {a['lines']} lines)"
        lines.append(f"{what:48s} {verdict}")
    return lines, differ, neither


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.kernels.same_code")
    p.add_argument("--against", required=True, help="the git revision to compare with")
    p.add_argument(
        "--sets", default="odd,grouped,gluon,quant", help=f"comma-separated, of {', '.join(SETS)}"
    )
    args = p.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    if not sets or set(sets) - set(SETS):
        p.error(f"--sets takes some of {', '.join(SETS)}, got {args.sets!r}")
    here = Path(offline_compile.__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as d:
        try:
            there = exported(args.against, Path(d), here)
        except ValueError as exc:
            p.error(str(exc))
        xs = launches(sets)
        lines, differ, neither = compare(xs, compiled(here, xs), compiled(there, xs))
    print("\n".join(lines))
    same = len(xs) - differ - neither
    print(
        f"{same} of {len(xs)} launches compile to the same SASS as {args.against}, {differ} "
        f"differ, {neither} not compiled offline"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
