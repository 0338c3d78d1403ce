# shellcheck shell=bash
# Shared by scripts/demo and scripts/test: what a fresh Debian 12 machine
# needs, installed when we are root, or the exact command when we are not.

# Packages every build needs (the lists are used by the scripts that source this).
# shellcheck disable=SC2034
SC_BUILD_PACKAGES="cmake make gcc pkg-config libopenmpi-dev openmpi-bin \
libhdf5-openmpi-dev hdf5-tools libcmocka-dev libdeflate-dev libturbojpeg0-dev \
libjpeg62-turbo-dev libspng-dev"
# The Python package and its example: the extension builds with python3-dev
# and mpi4py's C API; numpy, torch and h5py run the example, pytest its tests,
# PIL decodes make-dataset's JPEG samples in the tests, torchvision is what
# SC_AUGMENT's stages are checked against (tests/python/test_augment.py).
# shellcheck disable=SC2034
SC_PYTHON_PACKAGES="python3-dev python3-mpi4py python3-numpy python3-torch python3-h5py \
python3-pytest python3-pil python3-torchvision"
# Packages the full test suite adds: clang and libFuzzer for the fuzz test,
# valgrind for the unit tests, Chromium and Python to render a trace plot
# and check that it is not blank, shellcheck for the scripts, and Slurm
# (slurm-wlm, munge) for the batch scripts on a real single-host cluster,
# and real photographs: GIMP's manual (gimp-help-en, tests/photos/stage.py)
# with jpegtran (libjpeg-turbo-progs) to add restart markers to some.
# (No LZF plugin: shardcache writes and reads LZF chunks itself.)
# shellcheck disable=SC2034
SC_TEST_PACKAGES="clang libclang-rt-14-dev valgrind chromium python3 shellcheck slurm-wlm munge \
gimp-help-en libjpeg-turbo-progs"

sc_missing_packages() {
    local p missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || missing="$missing $p"
    done
    echo "$missing"
}

# sc_ensure_packages PKG...: installs what is missing, or says how and fails.
sc_ensure_packages() {
    local missing
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "shardcache: this script sets up Debian 12; install by hand: $*" >&2
        return 1
    fi
    missing=$(sc_missing_packages "$@")
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" -eq 0 ]; then
        echo "shardcache: installing:$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing
    else
        echo "shardcache: missing Debian packages. Install them with:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
        return 1
    fi
}

# Open MPI refuses to start as root unless told twice.  Containers often
# forbid the shared-memory transport's single-copy mode (CMA), and its large
# messages then fail: copy twice instead (a user's choice wins).
sc_mpi_env() {
    . "$(dirname "${BASH_SOURCE[0]}")/../launch/ompi-env.sh"
}

# sc_build PRESET: configure and build one CMake preset.
sc_build() {
    cmake --preset "$1" >"build-$1.log" 2>&1 || { cat "build-$1.log"; return 1; }
    cmake --build --preset "$1" -j "$(nproc)" >>"build-$1.log" 2>&1 \
        || { tail -50 "build-$1.log"; return 1; }
    rm -f "build-$1.log"
}
