#!/usr/bin/env python3
"""Released NCCL loads libnccl-profiler-hooks.so inside a torch.distributed job.

Runs an all-reduce with the NCCL backend (world size = the GPUs present, at
most 2) with NCCL_PROFILER_PLUGIN pointing at the plugin, twice in one process
(destroy and re-create the process group: NCCL closes and reloads the plugin),
and checks: the results are right, NCCL logged that it loaded the plugin (and
which struct version), the plugin's init and finalize lines appear, and every
process exits cleanly. Exits 0 on success, 77 (skip) where torch, CUDA or the
plugin is missing, 1 on failure.

usage: torch_nccl_load.py PLUGIN.so PROFILE.yaml [OUTDIR]
"""
import os
import re
import subprocess
import sys

SKIP = 77


def worker(rank, world, port):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    for round_ in range(2):
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port + round_}",
                                rank=rank, world_size=world)
        x = torch.full((1 << 20,), float(rank + 1), device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        want = world * (world + 1) / 2
        ok = bool(torch.all(x == want).item())
        print(f"RESULT round={round_} rank={rank} ok={ok} value={x[0].item()} want={want}", flush=True)
        dist.destroy_process_group()
    print(f"EXIT rank={rank}", flush=True)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    plugin, profile = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    outdir = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else "/tmp/ncclhooks-torch"
    try:
        import torch
    except ImportError:
        print("SKIP: torch is not installed")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return SKIP
    if not os.path.exists(plugin):
        print(f"SKIP: {plugin} not built")
        return SKIP
    world = min(torch.cuda.device_count(), 2)
    env = dict(os.environ)
    env.update({
        "NCCL_PROFILER_PLUGIN": plugin,
        "NCCL_HOOKS_PROFILE": profile,
        "NCCL_HOOKS_DUMP_DIR": outdir,
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,ENV,PROFILE",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
        "PYTHONUNBUFFERED": "1",
    })
    port = 29500 + os.getpid() % 1000
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(world), str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outs, codes = [], []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\nTIMEOUT"
        outs.append(out)
        codes.append(p.returncode)
    log = "\n".join(outs)
    failures = []
    if any(c != 0 for c in codes):
        failures.append(f"exit codes {codes}")
    results = re.findall(r"RESULT round=(\d) rank=(\d+) ok=(\w+)", log)
    if len(results) != 2 * world or any(ok != "True" for _, _, ok in results):
        failures.append(f"all-reduce results {results}")
    loaded = re.findall(r"PROFILER/Plugin: Loaded (\S+) \(v(\d+)\)", log)
    if not loaded:
        failures.append("NCCL did not log loading the plugin")
    inits = re.findall(r"ncclhooks: comm .*profile", log)
    finals = re.findall(r"ncclhooks: .*last communicator finalized", log)
    if len(inits) < 2 * world:
        failures.append(f"plugin init lines: {len(inits)}, want >= {2 * world}")
    if len(finals) < 2 * world:
        failures.append(f"plugin finalize lines: {len(finals)}, want >= {2 * world}")
    for l in log.splitlines():
        if "ncclhooks" in l or "PROFILER/Plugin" in l or l.startswith("RESULT") or l.startswith("EXIT") or "WARN" in l:
            print(l)
    print(f"world size {world}; NCCL loaded: {sorted(set(loaded))}; init lines {len(inits)}; finalize lines {len(finals)}")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
