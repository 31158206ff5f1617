"""Which changed lines of JIT functions no recorded launch reaches (guard/reach.py)."""

import textwrap

from kernel_ratchet.guard.reach import changed_lines, unreached

BEFORE = textwrap.dedent(
    """
    import triton
    import triton.language as tl


    @triton.jit
    def _helper(x, MODE: tl.constexpr):
        if MODE == 2:
            x = x * 2
        return x


    @triton.jit
    def _store_t(ptr, x):
        tl.store(ptr, x)


    @triton.jit
    def _kernel(ptr, n, WRITE_T: tl.constexpr, MODE: tl.constexpr = 1):
        pid = tl.program_id(0)
        x = tl.load(ptr + pid)
        x = _helper(x, MODE)
        if WRITE_T:
            _store_t(ptr, x)
        else:
            x = x + 1
        if pid > 0:
            x = x + 3
        tl.store(ptr, x)


    @triton.jit
    def _other(ptr):
        tl.store(ptr, 0)


    def launch(ptr, n):
        _kernel[(n,)](ptr, n, WRITE_T=False)
    """
)


def _edit(old: str, new: str) -> dict[str, str]:
    assert old in BEFORE
    return {"k.py": BEFORE.replace(old, new)}


def _reach(after: dict[str, str], launched) -> list[str]:
    return [u.text() for u in unreached({"k.py": BEFORE}, after, launched)]


NO_T = {"_kernel": [{"n": 8, "WRITE_T": False, "MODE": 1}]}
WITH_T = {"_kernel": [*NO_T["_kernel"], {"n": 8, "WRITE_T": True, "MODE": 1}]}


def test_a_change_under_a_branch_no_launch_takes_is_named_with_its_condition():
    after = _edit("        _store_t(ptr, x)\n", "        _store_t(ptr, x)\n        x = x\n")
    (only,) = _reach(after, NO_T)
    assert only.startswith("k.py:25 (`_kernel`): under `if WRITE_T`")
    assert "no recorded launch of `_kernel` takes (1 argument set)" in only
    assert _reach(after, WITH_T) == []  # one launch with WRITE_T=True reaches it


def test_an_else_branch_is_judged_by_its_condition_being_false():
    after = _edit("        x = x + 1\n", "        x = x + 2\n")
    assert _reach(after, NO_T) == []
    (only,) = _reach(after, {"_kernel": [{"WRITE_T": True}]})
    assert "under the else of `if WRITE_T`, which no recorded launch" in only


def test_a_helper_is_reached_through_its_callers_with_their_arguments_bound():
    # _store_t is called only under WRITE_T; _helper's MODE comes from the kernel's MODE
    store = _edit(
        "    tl.store(ptr, x)\n\n\n@triton.jit\ndef _kernel",
        "    tl.store(ptr, x + 0)\n\n\n@triton.jit\ndef _kernel",
    )
    assert (
        "no measured launch runs `_store_t`, directly or through a JIT function"
        in _reach(store, NO_T)[0]
    )
    assert _reach(store, WITH_T) == []
    doubled = _edit("        x = x * 2\n", "        x = x * 3\n")
    (only,) = _reach(doubled, NO_T)
    assert "under `if MODE == 2`, which no recorded launch of `_helper` takes" in only
    assert _reach(doubled, {"_kernel": [{"WRITE_T": False, "MODE": 2}]}) == []


def test_a_condition_the_arguments_do_not_decide_counts_as_reached():
    after = _edit("        x = x + 3\n", "        x = x + 4\n")
    assert _reach(after, NO_T) == []  # `pid > 0` depends on the program id


def test_a_kernel_no_shape_launches_and_host_code_are_told_apart():
    after = _edit("    tl.store(ptr, 0)\n", "    tl.store(ptr, 1)\n")
    (only,) = _reach(after, NO_T)
    assert only.startswith("k.py:34 (`_other`): no measured launch runs `_other`")
    host = _edit("WRITE_T=False)\n", "WRITE_T=True)\n")
    assert _reach(host, NO_T) == []  # host code: not judged
    assert _reach(after, {}) != []


def test_runs_of_lines_are_grouped_and_a_reached_line_splits_them():
    after = _edit(
        "    if WRITE_T:\n        _store_t(ptr, x)\n",
        "    if WRITE_T:\n        a = 1\n        b = 2\n        _store_t(ptr, x)\n",
    )
    assert _reach(after, NO_T) == [
        "k.py:24-25 (`_kernel`): under `if WRITE_T`, which no recorded launch of `_kernel` "
        "takes (1 argument set)"
    ]
    both = _edit(
        "    x = _helper(x, MODE)\n    if WRITE_T:\n        _store_t(ptr, x)\n",
        "    x = _helper(x, MODE + 0)\n    if WRITE_T:\n        _store_t(ptr, x)\n        c = 3\n",
    )
    assert [u.split(" (")[0] for u in _reach(both, NO_T)] == ["k.py:25"]


def test_changed_lines_maps_removals_to_the_block_they_left():
    old = "a\nb\nc\nd\n"
    assert changed_lines(old, "a\nB\nc\nd\n") == [2]
    assert changed_lines(old, "a\nb\nx\ny\nc\nd\n") == [3, 4]
    assert changed_lines(old, "a\nb\nd\n") == [2]  # c removed: the line before
    assert changed_lines(None, "a\nb") == [1, 2]  # a new file: all of it


WS = textwrap.dedent(
    """
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl


    @gluon.jit
    def _consumer(x, WHICH: gl.constexpr):
        if WHICH == 1:
            x = x + 1
        return x


    @gluon.jit
    def _combine(a, b):
        return a + b


    @gluon.jit
    def _ws_kernel(x, SPLIT: gl.constexpr):
        gl.warp_specialize([(_consumer, (x, 0)), (_consumer, (x, SPLIT))], [4], [24])
        y = gl.reduce(x, 0, _combine)
    """
)


def test_partitions_and_functions_handed_over_are_reached_through_their_pairs():
    """``gl.warp_specialize`` takes (function, arguments) pairs; a combine function handed
    to a reduction is referenced, not called: both run where their kernel runs."""
    after = {"ws.py": WS.replace("x = x + 1", "x = x + 2").replace("a + b", "b + a")}
    launched = {"_ws_kernel": [{"SPLIT": 0}]}
    (only,) = [u.text() for u in unreached({"ws.py": WS}, after, launched)]
    assert "under `if WHICH == 1`, which no recorded launch of `_consumer` takes" in only
    assert [u.text() for u in unreached({"ws.py": WS}, after, {"_ws_kernel": [{"SPLIT": 1}]})] == []


def test_helpers_are_not_judged_where_a_launched_kernel_is_defined_elsewhere():
    """A kernel launched from a file the check did not read may call any helper: only the
    kernels themselves are judged then."""
    helper = _edit("        x = x * 2\n", "        x = x * 3\n")
    kernel = _edit("        _store_t(ptr, x)\n", "        _store_t(ptr, x)\n        x = x\n")
    elsewhere = {**NO_T, "_kernel_in_another_file": [{}]}
    assert _reach(helper, NO_T) != [] and _reach(helper, elsewhere) == []
    assert _reach(kernel, elsewhere) == _reach(kernel, NO_T) != []
