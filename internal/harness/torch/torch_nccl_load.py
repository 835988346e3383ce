#!/usr/bin/env python3
"""Released NCCL loads libnccl-profiler-hooks.so inside a torch.distributed job.

Runs an all-reduce with the NCCL backend (world size = the GPUs present, at
most 2) with NCCL_PROFILER_PLUGIN pointing at the plugin, twice in one process
(destroy and re-create the process group: NCCL closes and reloads the plugin),
and checks: the results are right, NCCL logged that it loaded the plugin (and
which struct version), the plugin's init and finalize lines appear, every
process exits cleanly, and the plugin recorded: each worker's output file
(ncclhooks-<host>-<pid>.jsonl in OUTDIR) has record lines or aggregate rows
for the all-reduces and all-to-alls (from NCCL's host events on released NCCL, which has no
device hook: NCCL_HOOKS_SOURCE=auto picks them), with records + dropped =
matched in every final dump_stats line. Exits 0 on success, 77 (skip) where torch, CUDA or the
plugin is missing, 1 on failure.

With --ranks N, N processes share GPU 0: each gets its own NCCL_HOSTID, so
NCCL (any version, the wheel's 2.28.9 included) treats them as separate nodes
and joins them through its socket transport over loopback
(NCCL_SOCKET_IFNAME=lo). That path has proxy operations, so NCCL's host events
carry kernel channels and the all-reduces are real ring collectives between
ranks; each round also runs all-reduces from 8 B to 64 MiB and a ring of
send/recv between the ranks, every result checked.

usage: torch_nccl_load.py [--ranks N] PLUGIN.so PROFILE.yaml [OUTDIR]
"""
import glob
import json
import os
import re
import subprocess
import sys

SKIP = 77


def worker(rank, world, port, one_gpu):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0 if one_gpu else rank)
    for round_ in range(2):
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port + round_}",
                                rank=rank, world_size=world)
        x = torch.full((1 << 20,), float(rank + 1), device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        want = world * (world + 1) / 2
        ok = bool(torch.all(x == want).item())
        # With one GPU the all-reduce launches no kernel, so NCCL reports no
        # kernel channel; an all-to-all is send/recv to every rank, itself
        # included, and runs a real kernel at any world size.
        a = torch.arange(world * 4096, dtype=torch.float32, device="cuda") + rank * 1e6
        b = torch.empty_like(a)
        dist.all_to_all_single(b, a)
        torch.cuda.synchronize()
        ok = ok and bool(b[rank * 4096:(rank + 1) * 4096].eq(a[rank * 4096:(rank + 1) * 4096]).all().item())
        if one_gpu:
            ok = ok and between_ranks(rank, world)
        print(f"RESULT round={round_} rank={rank} ok={ok} value={x[0].item()} want={want}", flush=True)
        dist.destroy_process_group()
    print(f"EXIT rank={rank}", flush=True)


def between_ranks(rank, world):
    """All-reduces from 8 B to 64 MiB and a ring of send/recv, each checked."""
    import torch
    import torch.distributed as dist

    ok = True
    for n in (2, 1 << 14, 1 << 18, 1 << 24):  # float32 elements: 8 B, 64 KiB, 1 MiB, 64 MiB
        for _ in range(3):
            x = torch.full((n,), float(rank + 1), device="cuda")
            dist.all_reduce(x)
            ok = ok and bool(torch.all(x == world * (world + 1) / 2).item())
    send = torch.full((1 << 16,), float(rank), device="cuda")
    recv = torch.empty_like(send)
    for _ in range(3):
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, (rank + 1) % world),
                                       dist.P2POp(dist.irecv, recv, (rank - 1) % world)])
        for r in reqs:
            r.wait()
        torch.cuda.synchronize()
        ok = ok and bool(torch.all(recv == float((rank - 1) % world)).item())
    return ok


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
        return 0
    ranks = 0
    if len(sys.argv) >= 3 and sys.argv[1] == "--ranks":
        ranks = int(sys.argv[2])
        del sys.argv[1:3]
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
    world = ranks or min(torch.cuda.device_count(), 2)
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
    os.makedirs(outdir, exist_ok=True)
    port = 29500 + os.getpid() % 1000
    def rank_env(r):
        if not ranks:
            return env
        # One NCCL_HOSTID per process: NCCL's duplicate-GPU check compares host hashes.
        return dict(env, NCCL_HOSTID=f"ncclhooks-rank{r}", NCCL_SOCKET_IFNAME="lo")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(world), str(port), "1" if ranks else "0"],
                              env=rank_env(r), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
    out_failures, none_possible = check_outputs(outdir, [p.pid for p in procs], world)
    failures += out_failures
    for l in log.splitlines():
        if "ncclhooks" in l or "PROFILER/Plugin" in l or l.startswith("RESULT") or l.startswith("EXIT") or "WARN" in l:
            print(l)
    print(f"world size {world}; NCCL loaded: {sorted(set(loaded))}; init lines {len(inits)}; finalize lines {len(finals)}")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    if none_possible:
        print("SKIP: the plugin loaded and its accounting is exact, but at world size 1 NCCL's host events "
              "have no kernel channels to record (a 1-rank all-reduce launches no kernel, and send/recv to self "
              "has no proxy operations, which is where NCCL reports kernel channels: enqueue.cc, "
              "nProxyOps = selfSend ? 0 : 2); run on 2 or more GPUs to see records from host events")
        return 77
    print("PASS")
    return 0


def check_outputs(outdir, pids, world):
    """Each worker's output has records (or aggregate rows) and exact accounting.

    Returns the failures, and whether every output was empty only because no
    record was possible: host events at world size 1 (see main)."""
    failures, none_possible = [], False
    for pid in pids:
        files = glob.glob(os.path.join(outdir, f"ncclhooks-*-{pid}.jsonl")) + \
            glob.glob(os.path.join(outdir, f"ncclhooks-*-{pid}.*.jsonl"))
        if len(files) != 1:
            failures.append(f"worker pid {pid}: want one output file in {outdir}, found {files}")
            continue
        header, records, rows, funcs, finals, agg_hooks = {}, 0, 0, set(), {}, set()
        with open(files[0]) as f:
            for n, line in enumerate(f, 1):
                try:
                    v = json.loads(line)
                except ValueError as e:
                    failures.append(f"{files[0]}:{n}: not JSON: {e}")
                    break
                t = v.get("type")
                if t == "header":
                    header = v
                elif t == "record":
                    records += 1
                    if "func" in v:
                        funcs.add(v["func"])
                elif t == "aggregate" and v.get("final"):
                    agg_hooks.add((v["hook"], v["device"]))
                    rows += len(v.get("rows", []))
                    funcs.update(r["func"] for r in v.get("rows", []) if "func" in r)
                elif t == "dump_stats" and v.get("final"):
                    finals[(v["hook"], v["device"])] = v
        bad = [f"{h}/dev{d}: records {s['records_total']} + dropped {s['dropped_total']} != matched {s['matched_total']}"
               for (h, d), s in finals.items() if s["records_total"] + s["dropped_total"] != s["matched_total"]
               # An aggregate-only hook records nothing: its aggregates count what it matched
               # (ncclhooks check compares them), and its dump_stats has 0 records, 0 drops.
               and not ((h, d) in agg_hooks and s["records_total"] == 0 and s["dropped_total"] == 0)]
        print(f"OUTPUT pid={pid} file={files[0]} backend={header.get('backend')} records={records} "
              f"aggregate_rows={rows} functions={sorted(funcs)} final_dumps={len(finals)}")
        if records == 0 and rows == 0 and world == 1 and header.get("backend") == "host":
            none_possible = True
        elif records == 0 and rows == 0:
            failures.append(f"worker pid {pid}: {files[0]} has no record lines and no aggregate rows: "
                            f"the plugin loaded but recorded nothing (backend {header.get('backend')!r}; "
                            "on released NCCL it should be 'host': see the ncclhooks INFO lines above)")
        if not finals:
            failures.append(f"worker pid {pid}: no final dump_stats line in {files[0]}")
        if bad:
            failures.append(f"worker pid {pid}: inexact accounting: " + "; ".join(bad))
        if funcs and not any(fn.startswith("AllReduce") or fn == "SendRecv" for fn in funcs):
            failures.append(f"worker pid {pid}: neither AllReduce nor SendRecv among the functions {sorted(funcs)}")
    return failures, none_possible and not failures


if __name__ == "__main__":
    sys.exit(main())
