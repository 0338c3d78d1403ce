#!/usr/bin/env python3
"""The library's layers (docs/architecture.md), checked two ways.

1. By reading: every #include in runtime/<layer>/ names a header of its own
   layer or one below, a public header, or a system header the layer may
   use (<hdf5.h> only in storage; <mpi.h> nowhere below storage; no threads
   or atomics in core or codec; the compression and JPEG libraries only in
   codec; CUDA and NCCL only in base/features.c and pipeline/dev_cuda.c,
   the CUDA backend).
2. By building: with the compile command CMake uses for each layer, a
   probe file that includes what the layer must not see is compiled, and
   must fail (and the layer's own sources must compile with the same
   command, so a failure means the rule, not a broken command).
3. By linking: every shardcache symbol a layer's objects call is defined
   in that layer or one below (a public header would let a call upward
   compile), and storage calls MPI only for local queries: it never
   sends a message (mpi/node.c does it for storage).

Usage: layers.py SOURCE_DIR BUILD_DIR.  Prints one line per check and
'N passed, M failed'; exits 1 on any failure.
"""
import json, os, re, shlex, subprocess, sys, tempfile

LAYERS = ["base", "core", "codec", "storage", "mpi", "pipeline", "api"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# System headers a layer may include, beyond libc/POSIX: lowest layer allowed.
# pthread.h from base: mem.c's per-thread buffers (a key and its destructor;
# base starts no thread), which io's direct transfers bounce through.
SYSTEM_FLOOR = {"hdf5.h": "storage", "mpi.h": "storage", "pthread.h": "base",
                "stdatomic.h": "base"}
NOT_IN = {"stdatomic.h": {"core", "codec"}, "pthread.h": {"core", "codec"}}
# The codecs' libraries: codec/ alone wraps them (byte work, no HDF5 or MPI).
CODEC_ONLY = {"libdeflate.h", "turbojpeg.h", "jpeglib.h", "jerror.h"}
CUDA_FILES = {"base/features.c", "pipeline/dev_cuda.c"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("FAIL - " + what)


def read_rules(src):
    runtime = os.path.join(src, "runtime")
    home = {}  # header name -> layer
    for layer in LAYERS:
        for f in os.listdir(os.path.join(runtime, layer)):
            if f.endswith(".h"):
                check(f not in home, f"header {f} has one home ({layer})")
                home[f] = layer
    for layer in LAYERS:
        d = os.path.join(runtime, layer)
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            rel = f"{layer}/{f}"
            bad = []
            for kind, name in INCLUDE.findall(open(os.path.join(d, f)).read()):
                if kind == '"' and not name.startswith("shardcache"):
                    if name not in home:
                        bad.append(f'"{name}" is no runtime header')
                    elif RANK[home[name]] > RANK[layer]:
                        bad.append(f'"{name}" is from {home[name]}, above {layer}')
                elif kind == "<":
                    floor = SYSTEM_FLOOR.get(name)
                    if floor and RANK[layer] < RANK[floor]:
                        bad.append(f"<{name}> is for {floor} and above")
                    if layer in NOT_IN.get(name, ()):
                        bad.append(f"<{name}> is not for {layer}")
                    if (name.startswith("cuda") or name == "nccl.h") and rel not in CUDA_FILES:
                        bad.append(f"<{name}> is only for {', '.join(sorted(CUDA_FILES))}")
                    if name == "hdf5.h" and layer != "storage":
                        bad.append("<hdf5.h> is only for storage")
                    if name in CODEC_ONLY and layer != "codec":
                        bad.append(f"<{name}> is only for codec")
            check(not bad, f"{rel} includes only what its layer may" +
                  ("" if not bad else ": " + "; ".join(bad)))
    return home


def compile_commands(build):
    with open(os.path.join(build, "compile_commands.json")) as f:
        return json.load(f)


def command_for(entries, layer, src):
    """The compile command of one of the layer's own sources, as argv."""
    for e in entries:
        if e["file"].startswith(os.path.join(src, "runtime", layer) + os.sep) \
                and e["file"].endswith(".c"):
            argv = e.get("arguments") or shlex.split(e["command"])
            return e["file"], argv, e["directory"]
    return None, None, None


def try_compile(argv, directory, source_file, text=None):
    """Compiles source_file (or `text` in its place) with argv's flags."""
    with tempfile.TemporaryDirectory() as tmp:
        target = source_file
        if text is not None:
            target = os.path.join(tmp, "probe.c")
            with open(target, "w") as f:
                f.write(text)
        out = os.path.join(tmp, "probe.o")
        args, skip = [], False
        for a in argv:
            if skip:
                skip = False
                continue
            if a == "-o":
                skip = True
                continue
            if a == "-c" or a == source_file or a.startswith("-o"):
                continue
            args.append(a)
        # -Werror etc. stay: the probe is meant to fail only on its include.
        args = [a for a in args if not a.startswith(("-MD", "-MF", "-MT", "-MQ"))]
        r = subprocess.run(args + ["-c", target, "-o", out], cwd=directory,
                           capture_output=True, text=True)
        return r.returncode == 0, r.stderr


def build_rules(src, build):
    entries = compile_commands(build)
    probes = {
        "base": ['#include <mpi.h>', '#include <hdf5.h>', '#include "plan_state.h"',
                 '#include "shardcache.h"'],
        "core": ['#include <mpi.h>', '#include <hdf5.h>', '#include "cache.h"',
                 '#include "shardcache/plan_share.h"', '#include "shardcache.h"'],
        "codec": ['#include <mpi.h>', '#include <hdf5.h>', '#include "h5.h"',
                  '#include "source.h"', '#include "shardcache.h"', '#include "plan_state.h"'],
        "storage": ['#include "plan_bcast.h"', '#include "stream.h"'],
        "mpi": ['#include <hdf5.h>', '#include "stream.h"', '#include "resume.h"'],
        "pipeline": ['#include <hdf5.h>', '#include "resume.h"'],
        "api": ['#include <hdf5.h>'],
    }
    for layer in LAYERS:
        file, argv, directory = command_for(entries, layer, src)
        check(argv is not None, f"{layer}: CMake has a compile command")
        if argv is None:
            continue
        ok, err = try_compile(argv, directory, file)
        check(ok, f"{layer}: {os.path.basename(file)} compiles with its layer's command"
              + ("" if ok else ": " + err.strip().splitlines()[0]))
        flags = " ".join(argv)
        if layer in ("base", "core", "codec"):
            check("mpi" not in flags.lower() and "hdf5" not in flags.lower(),
                  f"{layer}: no MPI or HDF5 include path or flag")
        for probe in probes[layer]:
            ok, _ = try_compile(argv, directory, file, probe + "\nint sc_probe;\n")
            check(not ok, f"{layer}: '{probe}' does not compile there")


# MPI calls storage may make: local queries, and the MPI-IO file access.
STORAGE_MPI = {"MPI_Comm_rank", "MPI_Comm_size", "MPI_Query_thread"}


def symbols(objects, flag):
    out = subprocess.run(["nm", flag] + objects, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines()
            if line.strip() and not line.endswith(":")}


def link_rules(build):
    defined_below = set()
    for layer in LAYERS:
        d = os.path.join(build, "CMakeFiles", f"sc_{layer}.dir", "runtime", layer)
        objects = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".c.o"))
        check(bool(objects), f"{layer}: its objects are built")
        if not objects:
            continue
        defined_below |= symbols(objects, "--defined-only")
        calls = {s for s in symbols(objects, "-u") if s.startswith("sc_")}
        upward = sorted(calls - defined_below)
        check(not upward, f"{layer}: calls no shardcache function of a layer above"
              + ("" if not upward else ": " + ", ".join(upward)))
        if layer == "storage":
            mpi = {s for s in symbols(objects, "-u") if s.startswith("MPI_")}
            check(mpi <= STORAGE_MPI, "storage: MPI only for local queries"
                  + ("" if mpi <= STORAGE_MPI else ": " + ", ".join(sorted(mpi - STORAGE_MPI))))


def main():
    src, build = sys.argv[1], sys.argv[2]
    read_rules(src)
    build_rules(src, build)
    link_rules(build)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
