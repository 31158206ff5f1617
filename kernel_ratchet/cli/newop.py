"""``ratchet new-op``: scaffold an op's ratchet.yaml entry and its focused test from flags."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from kernel_ratchet.cli.common import app, out

OUTPUTS = typer.Option(
    [], "--output", help="a returned tensor's name (default y, or out beside an input y)"
)
ARGS = typer.Option([], "--arg", help="a constant passed after the tensors")
KWARGS = typer.Option([], "--kwarg", help="a keyword constant, 'eps=1e-6'")
REFERENCE_KWARGS = typer.Option(
    [], "--reference-kwarg", help="a keyword constant of the reference, 'dim=-1'"
)
ROLES = typer.Option(
    [], "--role", help="an input's role in training, 'w=weight' (default: activation)"
)
MEASURE = typer.Option(None, help="what its campaigns decide on, 'quantity=kernel_time,l2=cold'")
BACKEND = typer.Option(
    "TRITON", help="its kernels' backend: TRITON, TORCH (plain PyTorch), CUDA, HIP, ..."
)
LANG = typer.Option(None, help="its language (default: the backend's, e.g. python for TORCH)")
REBUILD = typer.Option(None, help="a compiled backend's rebuild command, run after each change")


@app.command("new-op")
def new_op(
    name: str = typer.Argument(..., help="the op's name in ratchet.yaml"),
    function: str = typer.Option(..., help="the function under test, package.module:callable"),
    reference: str = typer.Option(..., help="its plain-PyTorch reference, module:callable"),
    inputs: list[str] = typer.Option(..., "--input", help="'x=[M, N] bfloat16', in order"),
    outputs: list[str] = OUTPUTS,
    gradients: list[str] = typer.Option([], "--gradient", help="an input whose grad is checked"),
    inplace: list[str] = typer.Option([], "--inplace", help="an input the op writes into"),
    args: list[str] = ARGS,
    kwargs: list[str] = KWARGS,
    reference_kwargs: list[str] = REFERENCE_KWARGS,
    roles: list[str] = ROLES,
    measure: str | None = MEASURE,
    backend: str = BACKEND,
    lang: str | None = LANG,
    rebuild: str | None = REBUILD,
    shapes: list[str] = typer.Option(
        ..., "--shape", help="'label:M=4096,N=4096,dtype=bfloat16' (one per target shape)"
    ),
    kernel_source: list[str] = typer.Option(
        [], help="a file a round may change (default: the function's module)"
    ),
    campaign_type: str = typer.Option("memory", help="memory | compute_fwd | compute_fwd_bwd"),
    work: str = typer.Option("bytes=io", help="the work formula: bytes=io, bytes=EXPR, flops=EXPR"),
    test_file: Path | None = typer.Option(None, help="default tests/test_<name>_focused.py"),
    no_test_file: bool = typer.Option(False, "--no-test-file", help="write no focused test"),
    profile: Path = typer.Option(Path("ratchet.yaml"), help="the ratchet.yaml to add the op to"),
):
    """Add an op to ratchet.yaml (kept otherwise; never overwriting one), with a focused test."""
    from kernel_ratchet.profile import scaffold as sc

    backend = sc.backend_of(backend)
    sc.require_rebuild(backend, rebuild)
    entry = sc.op_entry(
        name=name,
        function=function,
        reference=reference,
        inputs=sc.parse_pairs(inputs, "--input"),
        outputs=outputs,
        shapes=[sc.parse_shape(s) for s in shapes],
        kernel_source=kernel_source or [sc.module_file(profile.resolve().parent, function)],
        gradients=gradients,
        inplace_outputs=inplace,
        campaign_type=campaign_type,
        work=sc.parse_pairs([work], "--work"),
        backend=backend,
        lang=lang,
        rebuild=rebuild,
        **sc.constants(args, kwargs, reference_kwargs, roles, measure),
    )
    test = None if no_test_file else test_file or Path("tests") / f"test_{name}_focused.py"
    _write(profile, name, entry, test, backend)


def _write(profile: Path, name: str, entry: dict, test: Path | None, backend: str) -> None:
    """Add the op's entry (and its focused test) and say what was written and what is next."""
    from kernel_ratchet.profile import scaffold as sc

    sc.refuse_taken(profile, name, entry, test)  # before ratchet.yaml or a test is touched
    fresh = not profile.exists()
    suite = sc.project_suite(profile, test is not None)
    sc.add_op(profile, name, entry, full_test=suite)
    out.print(f"op [bold]{escape(name)}[/bold] added to {escape(str(profile))}", markup=True)
    if fresh and suite:
        out.print(sc.suite_note(suite))
    if test is not None:
        sc.write_focused_test(test, name, backend)
        out.print(f"focused test: {test}")
    written = " and ".join(str(x) for x in (profile, test) if x is not None)
    first = f"commit {written} (a campaign starts from a commit)"
    out.print(f"next: {first}, then {sc.next_steps(name, backend)}")
