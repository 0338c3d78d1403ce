"""tests/photos/stage.py DIR - real photographs for the test suite, from a Debian package.

gimp-help-en (Debian 12; in scripts/lib.sh's SC_TEST_PACKAGES) ships GIMP's
manual with 337 files named .jpg: photographs (the filters' examples, the
tutorials), screenshots and diagrams, 62 to 695 pixels on the short side
(median 300); 11 grayscale, 146 progressive, 74 with an ICC profile, and
one a PNG.  They are taken as installed, or, when the package is not
installed, downloaded with `apt-get download` and unpacked here (no root
needed).  Written into DIR (each file atomically, so that concurrent runs
of the suite can share DIR; a DIR already staged from the same package
version is kept):

  photos.h5      every one of those files as it is, sorted by path:
                 /images vlen uint8 (h5py.vlen_dtype), /labels int64 (the index)
  variants.h5    made from 4 of the photos with PIL, jpegtran and libturbojpeg,
                 each kind's 4 together: cmyk (PIL's convert("CMYK"), Adobe
                 inverted), ycck (libturbojpeg from CMYK pixels), png (a PNG
                 file), trailing (a JPEG then 2 KiB of other bytes), progressive,
                 gray, restart (a restart marker every MCU row), and the same
                 fields as photos.h5
  truncated.h5   8 photos, sample 5 cut to half its bytes
  photos.json    the package and version, and each file's name and kind

Exits 3 naming why when the package can be neither found nor downloaded
(stage() raises Unavailable), so that the tests skip saying why.
"""
import ctypes
import ctypes.util
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
from PIL import Image

PACKAGE = "gimp-help-en"
IMAGES = "usr/share/gimp/2.0/help/en/images"
SOURCES = ("tutorials/tone-mapping/power-lines.jpg", "tutorials/tone-mapping/apple-orchard-truck-from-camera.jpg",
           "tutorials/quickie-crop-example-source.jpg", "filters/examples/alien-map-taj.jpg")
KINDS = ("cmyk", "ycck", "png", "trailing", "progressive", "gray", "restart")
FORMAT = 1  # bump when what is staged changes


class Unavailable(Exception):
    pass


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


def package_version():
    try:
        out = run("dpkg-query", "-W", "-f=${Status} ${Version}", PACKAGE).stdout.decode()
        if out.startswith("install ok installed "):
            return out.split()[-1], "/"
    except (OSError, subprocess.CalledProcessError):
        pass
    return None, None


def download(into):
    """The package unpacked under `into` (apt-get download needs no root); its version."""
    try:
        run("apt-get", "download", "-q", PACKAGE, cwd=into)
    except (OSError, subprocess.CalledProcessError) as e:
        why = getattr(e, "stderr", b"") or str(e).encode()
        raise Unavailable(f"{PACKAGE} is not installed and `apt-get download {PACKAGE}` failed: "
                          f"{why.decode(errors='replace').strip()[-300:]}")
    deb = glob.glob(os.path.join(into, f"{PACKAGE}_*.deb"))[0]
    run("dpkg-deb", "-x", deb, os.path.join(into, "root"))
    version = run("dpkg-deb", "-f", deb, "Version").stdout.decode().strip()
    return version, os.path.join(into, "root")


def files_under(root):
    top = os.path.join(root, IMAGES)
    names = sorted(os.path.relpath(p, top) for p in glob.glob(os.path.join(top, "**", "*"),
                                                               recursive=True)
                   if p.lower().endswith((".jpg", ".jpeg")))
    if len(names) < 100:
        raise Unavailable(f"{top}: {len(names)} JPEG files, expected over 300 ({PACKAGE})")
    return top, names


def jpeg(img, **kw):
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=90, **kw)
    return out.getvalue()


def ycck(img):
    """A YCCK JPEG: libturbojpeg compresses CMYK pixels as YCCK (PIL cannot write one).
    Inverted as Adobe's CMYK is, which is how PIL (and libjpeg users) read it back."""
    lib = ctypes.CDLL(ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0")
    lib.tjInitCompress.restype = ctypes.c_void_p
    px = 255 - np.ascontiguousarray(np.asarray(img.convert("CMYK")))
    h, w = px.shape[:2]
    buf, size = ctypes.POINTER(ctypes.c_ubyte)(), ctypes.c_ulong(0)
    tj = ctypes.c_void_p(lib.tjInitCompress())
    TJPF_CMYK, TJSAMP_420 = 11, 2
    rc = lib.tjCompress2(tj, px.ctypes.data_as(ctypes.c_void_p), w, w * 4, h, TJPF_CMYK,
                         ctypes.byref(buf), ctypes.byref(size), TJSAMP_420, 90, 0)
    if rc != 0:
        raise RuntimeError("tjCompress2 could not make a YCCK JPEG")
    out = ctypes.string_at(buf, size.value)
    lib.tjFree(buf)
    lib.tjDestroy(tj)
    return out


def restart(data, tmp):
    """The same image with a restart marker every MCU row (jpegtran, lossless)."""
    if shutil.which("jpegtran") is None:
        raise Unavailable("jpegtran is missing (Debian's libjpeg-turbo-progs, in SC_TEST_PACKAGES)")
    src = os.path.join(tmp, "restart-in.jpg")
    with open(src, "wb") as f:
        f.write(data)
    return run("jpegtran", "-restart", "1", "-copy", "all", src).stdout


def variant(kind, data, tmp):
    img = Image.open(io.BytesIO(data)).convert("RGB")
    if kind == "cmyk":
        return jpeg(img.convert("CMYK"))
    if kind == "ycck":
        return ycck(img)
    if kind == "png":
        out = io.BytesIO()
        img.save(out, format="PNG")
        return out.getvalue()
    if kind == "trailing":
        return data + np.random.default_rng(len(data)).integers(0, 256, 2048, np.uint8).tobytes()
    if kind == "progressive":
        return jpeg(img, progressive=True)
    if kind == "gray":
        return jpeg(img.convert("L"))
    return restart(jpeg(img), tmp)


def write_set(path, blobs):
    tmp = f"{path}.{os.getpid()}.tmp"
    with h5py.File(tmp, "w") as f:
        d = f.create_dataset("images", (len(blobs),), dtype=h5py.vlen_dtype(np.uint8))
        for i, b in enumerate(blobs):
            d[i] = np.frombuffer(b, np.uint8)
        f["labels"] = np.arange(len(blobs), dtype=np.int64)
    os.replace(tmp, path)


def stage(out):
    """Stages the corpus into `out` (see the module's doc); returns photos.json's contents."""
    os.makedirs(out, exist_ok=True)
    manifest = os.path.join(out, "photos.json")
    version, root = package_version()
    if os.path.exists(manifest):
        with open(manifest) as f:
            have = json.load(f)
        if have.get("format") == FORMAT and (version is None or have["version"] == version):
            return have
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        if version is None:
            version, root = download(tmp)
        top, names = files_under(root)
        blobs = []
        for n in names:
            with open(os.path.join(top, n), "rb") as f:
                blobs.append(f.read())
        sources = [blobs[names.index(s)] for s in SOURCES]
        if not all(s.startswith(b"\xff\xd8") for s in sources):
            raise Unavailable(f"{top}: {SOURCES} are not all JPEG files ({PACKAGE} {version})")
        made = [(k, s, variant(k, sources[i], tmp)) for k in KINDS for i, s in enumerate(SOURCES)]
        cut = [sources[i % len(sources)] for i in range(8)]
        cut[5] = cut[5][:len(cut[5]) // 2]
        write_set(os.path.join(out, "photos.h5"), blobs)
        write_set(os.path.join(out, "variants.h5"), [b for _, _, b in made])
        write_set(os.path.join(out, "truncated.h5"), cut)
    have = {"format": FORMAT, "package": PACKAGE, "version": version, "names": names,
            "variants": [[k, s] for k, s, _ in made], "truncated": 5}
    tmp = f"{manifest}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(have, f)
    os.replace(tmp, manifest)
    return have


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tests/photos/stage.py DIR")
    try:
        m = stage(sys.argv[1])
    except Unavailable as e:
        print(f"stage.py: no photos: {e}", file=sys.stderr)
        sys.exit(3)
    print(f"stage.py: {len(m['names'])} photos from {m['package']} {m['version']}, "
          f"{len(m['variants'])} variants, in {sys.argv[1]}")
