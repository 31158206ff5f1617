"""The worker process: ``python -m kernel_ratchet.harness.worker_main`` (started by
:class:`kernel_ratchet.harness.worker.Worker`; not meant to be run by hand).

Protocol: the spec arrives in ``KR_WORKER_SPEC`` (JSON of ``WorkerSpec``); the first stdin line
carries a start-up nonce, read before the project is imported. The worker answers one ``ready``
line echoing it, then one JSON line per request (``{"op": "check" | "time" | "transfer" |
"release" | "exit", "nonce": ...}``) on :data:`~.channel.PROTO_FD`, each echoing the request's
nonce. File descriptor 1 goes to stderr, so nothing the candidate prints reaches the channel.

Order matters for anti-cheat: the timers and the harness's own functions are captured
(:class:`~kernel_ratchet.harness.anticheat.Sentinel`) *before* ``source_root`` is put on
``sys.path`` and the adapter is imported. After any failed request the worker puts back what
the candidate patched, answers, then exits: a candidate that failed once gets a fresh process.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import IO, Any

from kernel_ratchet.harness.channel import CHANNEL_REPLACED, PROTO_FD, digest

_now = time.perf_counter  # held before the project is imported


_CHANNEL: tuple[int, int] = (0, 0)  # (device, inode) of the channel at start


def _protocol_channel() -> IO[str]:
    global _CHANNEL
    os.dup2(1, PROTO_FD)
    os.dup2(2, 1)  # C-level printf of the candidate lands in the log, not in the protocol
    sys.stdout = sys.stderr
    st = os.fstat(PROTO_FD)
    _CHANNEL = (st.st_dev, st.st_ino)
    return os.fdopen(PROTO_FD, "w", buffering=1, encoding="utf-8")


class Session:
    """Serves the requests of one worker. Every method returns a protocol answer dict."""

    def __init__(self, spec: dict[str, Any], sentinel: Any) -> None:
        from kernel_ratchet.harness.adapter import load_adapter
        from kernel_ratchet.harness.autotune_alone import TunedAlone
        from kernel_ratchet.harness.l2_persist import persisting_limit
        from kernel_ratchet.harness.timing.registry import make_engine

        self.spec = spec
        self.device = spec["device"]
        self.sentinel = sentinel
        # the device's own persisting-L2 limit, read before the candidate's code is imported
        self.l2_limit = persisting_limit() if self.device.startswith("cuda") else None
        self.adapter = load_adapter(spec["adapter"])
        sentinel.watch_adapter(self.adapter)  # its reference and thresholds stay as loaded
        params = dict(spec.get("engine_params") or {})
        params.setdefault("device", self.device)
        self.engine = make_engine(spec["engine"], params)
        self.tuning = TunedAlone()  # autotuning done beside other work is redone alone

    def after_candidate(self) -> None:
        """The Sentinel's checks after the candidate ran (patched functions, hooks, modes,
        flags, threads, child processes) and, on CUDA, no persisting L2 state left behind."""
        self.sentinel.check()
        self.sentinel.verify_threads()
        if self.device.startswith("cuda"):
            from kernel_ratchet.harness.anticheat import CheatDetected
            from kernel_ratchet.harness.l2_persist import persisting_l2

            pinned = persisting_l2(self.l2_limit)
            if pinned:
                raise CheatDetected(
                    f"the candidate left persisting L2 state ({'; '.join(pinned)}): inputs "
                    "pinned in L2 survive the engine's L2 flush and fake a memory-bound gain"
                )

    def release(self) -> dict[str, Any]:
        """Give the device memory the allocator keeps cached back, while the worker idles
        beside another process's timing (the round's harness): held, it can starve it."""
        import gc

        import torch

        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
        return {"ok": True, "category": "ok", "detail": "cached memory released", "payload": {}}

    def sync(self) -> None:
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    # -- transfer (the training-idiom traces the guard judges, SPEC section 8) --

    def transfer(self, msg: dict[str, Any], shape: Any) -> dict[str, Any]:
        import importlib

        from kernel_ratchet.harness.training_sim import trace_idioms

        self.sentinel.check()
        modules = [importlib.import_module(m) for m in msg.get("cache_modules") or []]
        traces = trace_idioms(
            self.adapter,
            shape,
            device=self.device,
            steps=int(msg.get("steps", 8)),
            seed=int(msg["seed"]),
            repeats=int(msg.get("repeats", 5)),
            cache_modules=modules,
        )
        self.after_candidate()  # as after every request that ran the op
        detail = f"{traces.repeats} trace pairs of {traces.steps} steps"
        return {"ok": True, "category": "ok", "detail": detail, "payload": traces.to_payload()}

    # -- check --

    def check(self, shape: Any, seed: int) -> dict[str, Any]:
        try:
            return self._check(shape, seed)
        finally:  # it ran beside other GPU work: what it autotuned is picked again alone
            self.tuning.after_check()

    def _check(self, shape: Any, seed: int) -> dict[str, Any]:
        from kernel_ratchet.harness import anticheat as ac
        from kernel_ratchet.harness import inplace as ip
        from kernel_ratchet.harness import input_entropy, op_census, rebind_check
        from kernel_ratchet.harness.correctness import check_outputs

        ad = self.adapter
        self.sentinel.check()
        case = ad.make_case(shape, seed, self.device)
        snap = ac.snapshot_inputs(case)
        low = input_entropy.low_entropy_inputs(ac.tensors(case))
        if low:
            raise ac.CheatDetected(input_entropy.describe(low))
        with op_census.counting() as vendor_ops:  # not a timed call: the dispatcher sees it
            out, kept = ip.first_forward(ad, case)
            ac.output_tensors(out, "forward()")
            del out
            got = ad.outputs(case)
        ac.check_output_types(got)
        self.sync()
        outs = ac.output_tensors(dict(got), "outputs()")
        skip = kept.paths() if kept else frozenset()
        ac.verify_inputs(snap, skip)
        self.after_candidate()
        ref = ip.reference(ad, case, kept)
        self.sentinel.ready_to_compare()  # hooks, modes, patched functions, kernels
        thresholds = {name: ad.threshold(name) for name in ref}
        bad = [n for n in ac.nonfinite(outs) if n not in ref or not ac.nonfinite([(n, ref[n])])]
        if bad:  # an Inf the reference also has is judged position by position below
            snr = {n: float("-inf") for n in ref}
            return _fail("nan", f"output(s) {', '.join(bad)} hold NaN or Inf", {"snr": snr})
        result = check_outputs(got, ref, thresholds)
        payload = {"snr": result.snr, "passed": result.passed, "checks": ["types", "inputs"]}
        payload["vendor_ops"] = dict(vendor_ops)
        if not result.passed:
            return _fail("wrong", f"outputs disagree with the reference: {result.reason}", payload)
        # Same tensor objects, new values: the op must follow them (id()/data_ptr caches).
        sizes = [t.numel() * t.element_size() for _, t in outs]
        held = kept.storages(case) if kept else set()  # results in in-place fields: not freed
        ac.poison([(n, t) for n, t in outs if t.untyped_storage().data_ptr() not in held])
        del got, outs, ref  # freed poisoned blocks: a reused block cannot hold a right answer
        if self.device.startswith("cuda"):
            ac.check_stream_order(ad.forward(case), "forward()")
            payload["checks"].append("stream order")
        payload["checks"].append(
            rebind_check.run(self, case, snap, shape, seed, sizes, thresholds, kept)
        )
        self.after_candidate()
        return {"ok": True, "category": "ok", "detail": "all outputs pass", "payload": payload}

    # -- time --

    def time(self, msg: dict[str, Any], shape: Any) -> dict[str, Any]:
        forgotten = self.tuning.before_timing()
        if forgotten:
            _log(f"{forgotten} autotuned config(s) picked during checks: picked again alone")
        try:
            return self._time(msg, shape)
        finally:
            self.tuning.after_timing()

    def _time(self, msg: dict[str, Any], shape: Any) -> dict[str, Any]:
        from kernel_ratchet.harness import anticheat as ac
        from kernel_ratchet.harness import inplace as ip
        from kernel_ratchet.harness import timed_checks as tc
        from kernel_ratchet.harness.roofline_check import check_roofline
        from kernel_ratchet.harness.timing.engine import graph_mode

        ad, phase, seed = self.adapter, msg["phase"], int(msg["seed"])
        if phase == "bwd" and not ad.has_backward:
            return _fail("crash", f"{type(ad).__name__} has no backward to time")
        t0 = _now()
        case = ad.make_case(shape, seed, self.device)
        call = ad.backward if phase == "bwd" else ad.forward
        if phase == "bwd":
            ad.forward(case)  # the state the backward starts from is part of its inputs
        self.sentinel.check()  # after the op's last call: the hooks below are bound unpatched
        snap = ac.snapshot_inputs(case)  # its digests wait for the inputs
        kept = ip.InPlace.of(ad)
        spots = max(1, int(msg.get("spot_checks", tc.TimedCallChecks.SPOT_CHECKS)))
        hooks = tc.TimedCallChecks(
            self, case, snap, shape, seed, phase, call, spots, inplace=kept and kept.keep(case)
        )
        t1 = _now()
        with graph_mode(self.engine, msg.get("graph")):
            timing, hooks = tc.measure(hooks)
        t2 = _now()
        self.sync()
        ac.verify_inputs(hooks.snap, kept.paths() if kept else frozenset())
        self.after_candidate()
        idx = 1 if phase == "bwd" else 0
        ms = timing.median_ms
        check_roofline(ad.flops(shape)[idx], ms, msg.get("max_tflops"), "TFLOPS", 1e12)
        check_roofline(ad.bytes_moved(shape)[idx], ms, msg.get("max_gbps"), "GB/s", 1e9)
        t3 = _now()
        stages = {"inputs": t1 - t0, "measure": t2 - t1, "spot": hooks.spot_s, "after": t3 - t2}
        payload = {
            "median_ms": timing.median_ms,
            "stddev_ms": timing.stddev_ms,
            "samples_ms": list(timing.samples_ms),
            "engine": {**self.engine.describe(), **timing.details},
            "clock_mhz": list(timing.clock_mhz),
            "dropped": timing.dropped,
            "flags": list(timing.flags),
            "spot_checks": hooks.spot_done,
            # host seconds: inputs and digests; the measurement, spot checks included
            "stages_s": {k: round(v, 4) for k, v in stages.items()},
            "device": self.device,
        }
        return {"ok": True, "category": "ok", "detail": f"{phase} timed", "payload": payload}


def _fail(category: str, detail: str, payload: dict | None = None) -> dict[str, Any]:
    return {"ok": False, "category": category, "detail": detail, "payload": payload or {}}


def _log(line: str) -> None:
    """One line of the worker's own account in its log (stderr): when each request ran and how
    long it took, so a slow or stalled A/B can be read from the log alone."""
    stamp = time.strftime("%H:%M:%S", time.gmtime())
    print(f"[kr-worker {stamp}] {line}", file=sys.stderr, flush=True)


def _send(proto: IO[str], msg: dict[str, Any]) -> None:
    """One answer line; the process ends instead when the channel's descriptor was pointed
    elsewhere (a relay that rewrites answers below Python): nothing is written through it."""
    st = os.fstat(proto.fileno())
    if (st.st_dev, st.st_ino) != _CHANNEL:
        print("cheat: the protocol channel was replaced", file=sys.stderr, flush=True)
        os._exit(CHANNEL_REPLACED)
    # a fresh encoder: attributes set on json's shared one (its own ``encode``) cannot reach it
    proto.write(json.JSONEncoder().encode(msg) + "\n")
    proto.flush()


#: The harness modules a request calls into, imported before the candidate is.
_CHECKERS = (
    *("cheat", "correctness", "digest", "import_watch", "inplace", "input_entropy"),
    *("l2_persist", "process_guard", "rebind_check", "returned", "timed_checks", "surface"),
    *("audit_guard", "output_match", "op_census", "timing.engine", "timing.perf_counter"),
    *("timing.cuda_support",),
    *("timing.cuda_events", "timing.graphs", "timing.registry", "timing.sampling"),
)


def _capture() -> tuple[Any, Any, Any]:
    """(sentinel, Shape, classify_exception): the timers and the harness's own modules
    captured, and the two functions the request loop needs held, before the project is on
    ``sys.path`` (so a candidate cannot swap them)."""
    import torch  # noqa: F401 -- before the sentinel: it snapshots torch.cuda

    from kernel_ratchet.harness import anticheat
    from kernel_ratchet.harness.adapter import Shape
    from kernel_ratchet.harness.outcome import classify_exception

    for name in _CHECKERS:  # loaded now, so that the Sentinel keeps them
        importlib.import_module(f"kernel_ratchet.harness.{name}")
    # every harness module loaded by now is kept (Sentinel.capture adds them)
    sentinel = anticheat.Sentinel.capture((sys.modules[__name__],), audit=True)
    return sentinel, Shape, classify_exception


def _start(
    proto: IO[str], spec: dict[str, Any], sentinel: Any, classify: Any, hello: str
) -> Session:
    """The session of ``spec`` with the project imported; on failure the start-up answer is
    sent and the process exits (status 3)."""
    from kernel_ratchet.harness import import_roots
    from kernel_ratchet.harness.import_watch import ImportWatch

    import_roots.prefer(spec["source_root"], spec["adapter"])
    sentinel.imports = ImportWatch(spec["source_root"]).install()
    try:
        reference = import_roots.reference_module(spec["adapter"])
        if reference is not None:  # before the candidate: its libraries as they are
            sentinel.keep_libraries(reference)
        session = Session(spec, sentinel)
        import_roots.refuse_other_copy(spec["source_root"], spec["adapter"])
        sentinel.project_imported()
        return session
    except BaseException as exc:  # noqa: BLE001 -- a failing candidate is an outcome
        traceback.print_exc()
        category, detail = classify(exc)
        if category == "crash" and "ProfileError" in type(exc).__name__:
            category = "compile" if exc.__cause__ else "crash"
        _send(proto, {**_fail(category, f"start-up: {detail}"), "nonce": hello})
        os._exit(3)


def _answer(session: Session, msg: dict[str, Any], shape_cls: Any, classify: Any) -> dict:
    """The answer to one request; a failing candidate is a failed answer, never an exception."""
    try:
        if msg["op"] == "release":
            return session.release()
        shape = shape_cls.from_dict(msg["shape"])
        if msg["op"] == "check":
            return session.check(shape, int(msg["seed"]))
        if msg["op"] == "time":
            return session.time(msg, shape)
        if msg["op"] == "transfer":
            return session.transfer(msg, shape)
        return _fail("crash", f"unknown request {msg['op']!r}")
    except BaseException as exc:  # noqa: BLE001 -- a failing candidate is an outcome
        traceback.print_exc()
        category, detail = classify(exc)
        return _fail(category, detail)


def _refuse_replaced_timers(proto: IO[str], hello: str) -> None:
    """Answer "cheat" and exit when a clock of ``time`` is not the C builtin: a start-up hook
    (``sitecustomize``, a ``.pth`` file, outside the scope check) ran before the snapshot."""
    from kernel_ratchet.harness.process_guard import replaced_timers

    replaced = replaced_timers()
    if replaced:
        detail = (
            f"start-up: {', '.join(replaced)} is not the C builtin of the time module: a "
            "start-up hook (sitecustomize, a .pth file) replaced the clock before the worker ran"
        )
        _send(proto, {**_fail("cheat", detail), "nonce": hello})
        os._exit(3)


def _hello() -> str:
    """The start-up nonce: the first stdin line, read before the project is imported."""
    line = sys.stdin.readline()
    return str(json.loads(line).get("nonce", "")) if line.strip() else ""


def main() -> None:
    """Serve requests until ``exit``, end of input, or the first failed request."""
    t_start = time.monotonic()
    from kernel_ratchet.harness.pinning import continue_when_orphaned

    continue_when_orphaned()  # stopped while the other side timed, its driver gone: go on
    proto = _protocol_channel()
    spec = json.loads(os.environ["KR_WORKER_SPEC"])
    hello = _hello()
    sentinel, shape_cls, classify = _capture()
    _refuse_replaced_timers(proto, hello)
    session = _start(proto, spec, sentinel, classify, hello)
    info = {
        "has_backward": bool(session.adapter.has_backward),
        "schema": session.adapter.schema,
        "pid": os.getpid(),
    }
    _log(f"ready after {time.monotonic() - t_start:.2f} s (torch, harness, adapter imported)")
    _send(proto, {"ok": True, "event": "ready", "info": info, "nonce": hello})
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if msg["op"] == "exit":
            break
        t0 = time.monotonic()
        answer = _answer(session, msg, shape_cls, classify)
        parts = (msg["op"], msg.get("shape", {}).get("label"), msg.get("phase"))
        what = " ".join(str(x) for x in parts if x)
        _log(f"{what}: {answer['category']} in {time.monotonic() - t0:.3f} s")
        if not answer["ok"]:
            session.sentinel.restore()
        _send(proto, {**answer, "nonce": msg.get("nonce"), "request": digest(line)})
        if not answer["ok"]:
            sys.stderr.flush()
            os._exit(1)  # never reuse a process a candidate has failed in
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
