#!/usr/bin/env python3
"""Prints the percentage of pixels of a PNG that are not (near) white.

A decoder from the PNG specification (zlib and the five row filters), so
that the trace test needs nothing beyond Python's standard library.
"""
import struct
import sys
import zlib


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def ink(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError(f"unsupported PNG: depth {depth}, color type {color}")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    drawn = 0
    for y in range(height):
        f = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            row[i] = (row[i] + (0, a, b, (a + b) // 2, paeth(a, b, c))[f]) & 0xFF
        for x in range(0, stride, bpp):
            if min(row[x:x + 3]) < 230:
                drawn += 1
        prev = row
    return 100.0 * drawn / (width * height)


if __name__ == "__main__":
    print(f"{ink(sys.argv[1]):.2f}")
