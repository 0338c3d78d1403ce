#!/usr/bin/env python3
"""Writes the committed seed inputs of the fuzz targets (corpus/<target>/seed-*).

A few tiny inputs per target, valid and invalid, in the formats the targets
read (their comments say how).  Rerun after a format change: it rewrites the
seeds only; the regression inputs (crash-*) are kept.  Usage: make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def rnd(acc, lane):
    return rotl((acc + lane * P2) & M, 31) * P1 & M


def xxh64(data, seed):
    """XXH64, from the public specification (as runtime/base/hash.c)."""
    n, p = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while n - p >= 32:
            v = [rnd(v[i], struct.unpack_from("<Q", data, p + 8 * i)[0]) for i in range(4)]
            p += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while n - p >= 8:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, p)[0]), 27) * P1 + P4) & M
        p += 8
    if n - p >= 4:
        h = (rotl(h ^ (struct.unpack_from("<I", data, p)[0] * P1 & M), 23) * P2 + P3) & M
        p += 4
    while p < n:
        h = rotl(h ^ (data[p] * P5 & M), 11) * P1 & M
        p += 1
    h ^= h >> 33
    h = h * P2 & M
    h ^= h >> 29
    h = h * P3 & M
    return h ^ (h >> 32)


def ckpt(fields, magic=0x31305450434b4353, version=2, damage=False, pieces=None):
    """runtime/api/ckpt.c: a plain record (version 2: 15 little-endian words) or, with
    pieces, a resliced one (version 3: 21 words, two a piece (q, start, end)), then XXH64."""
    if pieces is not None:
        version = 3
        fields = fields + [len(pieces)]
    body = struct.pack("<%dQ" % (2 + len(fields)), magic, version, *fields)
    for q, start, end in pieces or []:
        body += struct.pack("<2Q", q << 40 | start, end)
    h = xxh64(body, 0x636b7074) ^ (1 if damage else 0)
    return body + struct.pack("<Q", h)


def audit(rank, world, pairs, setting=None, magic=0x3154494455414353):
    """fuzz_audit_parse.c: 4 bytes of setting, then audit-r<rank>.bin (native order)."""
    setting = setting or bytes([rank, world, 0, 0])
    return setting + struct.pack("=3Q", magic, rank, world) + b"".join(
        struct.pack("=2Q", e, i) for e, i in pairs)


PAD, DROP = 1 << 63, 1 << 62
# epoch, consumed, rank, world, seed, mode, exchange bits, remainder, batch,
# window, fingerprint, shards, batches per rank
REC = [2, 3, 0, 2, 7, 1, struct.unpack("<Q", struct.pack("<d", 0.3))[0], 2, 4, 0,
       0x0123456789abcdef, 16, 5]
SEEDS = {
    "ckpt_decode": {
        "valid": ckpt(REC),
        "ended": ckpt(REC[:1] + [5] + REC[2:]),
        "next-epoch": ckpt([3, 0, 1, 2] + REC[4:12] + [M]),
        # + world0, batches0, run, padded, dropped (npieces: from the pieces)
        "resliced": ckpt(REC + [4, 6, 0x72756e, 3, 2], pieces=[(0, 5, 9), (3, 0, 17)]),
        "resliced-left-nothing": ckpt(REC[:1] + [5] + REC[2:] + [4, 6, 1, 0, 0], pieces=[]),
        "resliced-bad-piece": ckpt(REC + [4, 6, 1, 0, 0], pieces=[(4, 5, 9)]),
        "version1": ckpt(REC, version=1),
        "magic": ckpt(REC, magic=0x31305450434b4354),
        "damaged": ckpt(REC, damage=True),
        "short": ckpt(REC)[:127],
        "empty": b"",
    },
    "audit_parse": {
        "rank0": audit(0, 2, [(0, 5), (0, 2 | PAD), (1, 7 | DROP)]),
        "rank1": audit(1, 2, [(0, 1), (0, 3)], bytes([1, 2, 3, 1])),
        "torn": audit(0, 1, [(0, 1)]) + b"\x01\x02\x03",
        "header": audit(0, 1, []),
        "magic": audit(0, 1, [(0, 1)], magic=0x3154494455414354),
        "other-rank": audit(1, 2, [], bytes([0, 2, 0, 0])),
        "world0": audit(0, 0, []),
        "other-world": audit(1, 3, [(0, 0)], bytes([1, 2, 0, 0])),
        "short": audit(0, 1, [])[:20],
    },
    "json": {
        "trace": b'{"traceEvents":[\n{"ph":"M","pid":0,"tid":0,"name":"process_name",'
                 b'"args":{"name":"rank 0"}},\n{"ph":"X","pid":0,"tid":1,"name":"read",'
                 b'"ts":12.5,"dur":3,"args":{"epoch":0,"shard":2,"bytes":4096}},\n'
                 b'{"ph":"i","s":"p","pid":0,"tid":0,"name":"epoch end","ts":1e3}]}\n',
        "values": b' [null, true, false, -0, 0.5e-3, 1E+2, 123456789012345678901, {}, []] ',
        "escapes": b'{"a\\"b":"\\\\ \\/ \\b\\f\\n\\r\\t \\u00e9 \\ud83d\\ude00 \\u0000","a\\"b":1}',
        "utf8": '"ünïcödé ✓"'.encode(),
        "deep": b"[" * 40 + b"]" * 40,
        "unterminated": b'{"traceEvents":[{"ph":"X',
        "lone-surrogate": b'"\\ud800x"',
        "trailing-comma": b"[1,2,]",
        "bad-number": b"[01, 1., -]",
        "two-values": b"{} {}",
        "control": b'"a\x01b"',
    },
}

for target, files in SEEDS.items():
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))
    for name, data in files.items():
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(data)
