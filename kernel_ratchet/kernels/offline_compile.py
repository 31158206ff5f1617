"""Compile one recorded Triton launch for a GPU that is not here: the part of :mod:`.offline`
that needs nothing of this package, so a fresh process can run it over another revision's
kernels (:mod:`.same_code`).

A launch is read by attribute: ``constexprs`` and ``options`` (pairs), ``spec`` (per runtime
argument: ``("ptr", dtype, aligned)``, ``("int", is_one, divisible_by_16)`` or a type name)
and ``ints`` (the integer arguments, in order), as :class:`.census.Launch` holds them.
"""

from __future__ import annotations

import inspect
from typing import Any

#: Launch keyword arguments that are compile options, not constexprs.
OPTIONS = (
    "num_warps",
    "num_stages",
    "num_ctas",
    "maxnreg",
    "enable_fp_fusion",
    "launch_cooperative_grid",
    "launch_pdl",
)


def arg_type(name: str, spec: object, value: int | None, attrs: dict, idx: int) -> object:
    """Triton's type string of one runtime argument (or ``("constexpr", v)``)."""
    if isinstance(spec, tuple) and spec[0] == "ptr":
        from triton._utils import canonicalize_dtype  # Triton's own dtype names

        try:
            elem = canonicalize_dtype(spec[1])
        except KeyError:
            raise ValueError(
                f"argument {name}: no Triton type for tensor dtype {spec[1]}"
            ) from None
        if spec[2]:
            attrs[(idx,)] = [["tt.divisibility", 16]]
        return "*" + elem
    if isinstance(spec, tuple) and spec[0] == "int":
        if spec[1]:
            return ("constexpr", 1)  # Triton specializes an integer equal to 1
        if spec[2]:
            attrs[(idx,)] = [["tt.divisibility", 16]]
        return "i64" if value is not None and not -(2**31) <= value < 2**31 else "i32"
    kinds = {"bool": "u1", "float": "fp32", "NoneType": ("constexpr", None)}
    if spec not in kinds:
        raise ValueError(f"argument {name}: cannot compile a {spec} argument offline")
    return kinds[spec]  # type: ignore[index]


def signature(fn: Any, launch: Any) -> tuple[dict, dict, dict, dict]:
    """Triton's (signature, constexprs, attrs, options) for ``launch`` of ``fn``."""
    if not hasattr(fn, "params"):  # interpreted: read its parameters from the plain function
        from triton.runtime.jit import JITFunction

        fn = JITFunction(fn.fn)
    kw = {**dict(launch.constexprs), **dict(launch.options)}
    options = {k: kw.pop(k) for k in OPTIONS if k in kw}
    names = list(fn.arg_names)
    passed = [n for n in names if n not in kw][: len(launch.spec)]
    sig: dict[str, str] = {}
    const: dict[str, object] = dict(kw)
    attrs: dict[tuple[int], list] = {}
    ints = iter(launch.ints)
    for name, spec in zip(passed, launch.spec, strict=True):
        is_int = isinstance(spec, tuple) and spec[0] == "int"
        t = arg_type(name, spec, next(ints, None) if is_int else None, attrs, names.index(name))
        if isinstance(t, tuple):
            const[name] = t[1]
        else:
            sig[name] = t
    for p in fn.params:
        if p.name in sig or p.name in const:
            continue
        if not p.is_constexpr or p.default is inspect.Parameter.empty:
            raise ValueError(f"{fn.__name__}: the launch gives no value for {p.name}")
        const[p.name] = p.default
    sig.update({n: "constexpr" for n in const})
    return {n: sig[n] for n in names}, const, attrs, options


def compile_launch(fn: Any, launch: Any, arch: int = 90) -> Any:
    """``fn`` (a ``@triton.jit`` function) compiled as ``launch`` would compile it on a
    ``sm_<arch>`` GPU; raises what Triton raises (e.g. a config out of resources)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, const, attrs, options = signature(fn, launch)
    src = ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)


def compile_gluon(fn, sig: dict, consts: dict, aligned: tuple[str, ...], opts: dict, arch: int):
    """Compile the Gluon kernel ``fn`` for ``sm_<arch>`` without a GPU: ``sig`` the types of
    its runtime arguments, ``consts`` its constexprs, ``aligned`` the pointers Triton may take
    as 16-byte aligned, ``opts`` the launch's options (the Gluon launchers' offline compiles)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    names = fn.arg_names
    src = GluonASTSource(
        fn,
        {**sig, **dict.fromkeys(consts, "constexpr")},
        {(names.index(k),): v for k, v in consts.items()},
        {(names.index(p),): [["tt.divisibility", 16]] for p in aligned},
    )
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)


def sass(compiled: Any) -> str:
    """The compiled kernel's SASS as ``nvdisasm`` prints it, without addresses, encodings,
    comments or directives: what decides what the SM runs, comparable across builds."""
    import os
    import re
    import subprocess
    import tempfile

    import triton

    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/nvdisasm")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(compiled.asm["cubin"])
        out = subprocess.run(
            [nvdisasm, "-c", path], capture_output=True, text=True, check=True
        ).stdout
    lines = (re.sub(r"/\*[0-9a-f]{4,}\*/", "", ln).strip() for ln in out.splitlines())
    return "\n".join(ln for ln in lines if ln and not ln.startswith(("//", ".")))


def defining_module(root: str, package: str, kernel: str) -> str:
    """The dotted name of the module under ``root``/``package`` that defines ``kernel``."""
    import os
    import re
    from pathlib import Path

    pattern = re.compile(rf"^def {re.escape(kernel)}\(", re.MULTILINE)
    base = os.path.join(root, package)
    for folder, _, files in sorted(os.walk(base)):
        for name in sorted(files):
            path = os.path.join(folder, name)
            if name.endswith(".py") and pattern.search(Path(path).read_text(encoding="utf-8")):
                rel = os.path.relpath(path, root)[: -len(".py")]
                return rel.replace(os.sep, ".")
    raise LookupError(f"no module under {base} defines {kernel}")


def launcher_module(root: str, package: str, module: str) -> str:
    """``module`` where it exists under ``root``; else the one module under ``root``/``package``
    of the same file name that defines ``compile_offline`` (a launcher moved between packages
    is the same launcher, as a Triton kernel is found by its name wherever it is defined)."""
    import os
    from pathlib import Path

    parts = module.split(".")
    if os.path.isfile(os.path.join(root, *parts) + ".py"):
        return module
    found = [
        os.path.relpath(os.path.join(folder, f"{parts[-1]}.py"), root)[: -len(".py")]
        for folder, _, files in sorted(os.walk(os.path.join(root, package)))
        if f"{parts[-1]}.py" in files
        and "def compile_offline(" in Path(folder, f"{parts[-1]}.py").read_text(encoding="utf-8")
    ]
    return found[0].replace(os.sep, ".") if len(found) == 1 else module


def main() -> int:
    """Read ``{"arch", "root", "package", "launches": [{"kernel", "launch"}]}`` on stdin;
    print, per launch, ``{"module", "sha256", "lines", "dropped"}`` of its SASS (``dropped``:
    the launch's constexprs this kernel does not take) or ``{"error"}``. A kernel named
    ``<module>.compile_offline`` is a Gluon kernel: that function, called with the launch's
    constexprs as keyword arguments, compiles it."""
    import hashlib
    import importlib
    import json
    import sys
    from types import SimpleNamespace

    job = json.load(sys.stdin)

    def tup(v: Any) -> Any:
        return tuple(tup(i) for i in v) if isinstance(v, list) else v

    out = []
    for item in job["launches"]:
        try:
            if item["kernel"].endswith(".compile_offline"):  # a Gluon kernel's launcher
                module = item["kernel"].rsplit(".", 1)[0]
                module = launcher_module(job["root"], job["package"], module)
                kw = {k: tup(v) for k, v in item["launch"]["constexprs"]}
                code = sass(importlib.import_module(module).compile_offline(**kw))
                lines = code.count("\n") + 1
                sha = hashlib.sha256(code.encode()).hexdigest()
                out.append({"module": module, "sha256": sha, "lines": lines, "dropped": []})
                continue
            module = defining_module(job["root"], job["package"], item["kernel"])
            fn = getattr(importlib.import_module(module), item["kernel"])
            launch = SimpleNamespace(**{k: tup(v) for k, v in item["launch"].items()})
            # a constexpr this revision's kernel does not have yet: its knob did not exist
            dropped = [k for k, _ in launch.constexprs if k not in (*fn.arg_names, *OPTIONS)]
            launch.constexprs = tuple(kv for kv in launch.constexprs if kv[0] not in dropped)
            code = sass(compile_launch(fn, launch, job["arch"]))
            sha = hashlib.sha256(code.encode()).hexdigest()
            lines = code.count("\n") + 1
            out.append({"module": module, "sha256": sha, "lines": lines, "dropped": dropped})
        except Exception as exc:  # a launch that does not compile here is a result
            out.append({"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
