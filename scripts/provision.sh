#!/usr/bin/env bash
# Provision everything MQD Dashboard needs on a Debian bookworm machine, idempotently and
# without prompts:
#   1. Debian packages (compilers incl. gfortran, elfutils/libdw, dwz, chromium for e2e,
#      sqlite, iproute2)
#   2. bookworm deb-src, then Debian's source packages of Open MPI 4.1.4 and MPICH 4.0.2, and
#      (through a trixie deb-src entry pinned to -1, so nothing is ever installed from trixie)
#      trixie's Open MPI 5.0.7 and MPICH 4.2.1, and MPICH 4.0.2 a second time with its ch4 device
#      (ch4:ofi over Debian's libfabric: MPICH 4.x's default device, while trixie's 4.2.1 source
#      cannot be fetched here); each built with -g from the pristine upstream
#      tarball (*.orig.tar.*) into a cache outside the repository ($MQD_MPI_CACHE, default
#      /var/cache/mqd-mpi). Missing builds run side by side, make's -j split between them.
#   2b. Debian's UCX 1.13.1 (source package ucx) built with -g into $MQD_MPI_CACHE/ucx-1.13.1, before
#      the Open MPI builds, which are configured --with-ucx against it (pml ob1 or ucx at run time)
#   3. LLVM's OpenMP runtime 16.0.6 with OMPD (libomp.so keeping its symbol table, libompd.so),
#      built from bookworm's llvm-toolchain-16 source package into
#      $MQD_OPENMP_PREFIX (default $MQD_MPI_CACHE/llvm-openmp-16.0.6), beside the MPI builds
#   4. node modules (npm ci / npm install)
# A second run does nothing: each step checks a stamp or the installed state first.
# Usage: scripts/provision.sh [--no-node] [--only-apt] [--only MPI[,MPI...]] [--no-openmp]
#   --only openmpi|mpich|mpichch4|openmpi5|mpich42: build just those MPI builds (the demo's first
#   run builds only the one it runs: npm run demo); --no-openmp: skip the OpenMP runtime.
# MPICH 4.2.1's source is looked for in this order (docs/provisioning.md, "Where MPICH 4.2.1 comes from"):
#   1. MQD_MPICH42_TARBALL=/path/mpich-4.2.1.tar.gz, an explicit tarball;
#   2. Debian trixie's source package mpich=4.3.0+really4.2.1-1 (apt checks it against the .dsc);
#   3. a local sources folder, $MQD_SOURCES_DIR (default the shared/sources folder beside the checkout's;
#      a site can pre-seed its own) holding mpich-4.2.1.tar.gz;
#   4. upstream's release tarball from mpich.org, on a machine with internet access.
# A tarball is used only when its sha256 is a known one (MPICH42_SHA256S below, or a site's own
# MQD_MPICH42_SHA256): otherwise MQD_E_SOURCE_CHECKSUM names the file and both sums. No source at
# all is MQD_E_PROVISION_MPICH42 (docs/mpi-facts.md, "Open MPI 5.0.7 and MPICH 4.2.1").
# MQD_OPENMP_TARBALL=/path/llvm-toolchain-16_16.0.6.orig.tar.xz skips downloading that (136 MB).
set -euo pipefail

MQD_MPI_CACHE=${MQD_MPI_CACHE:-/var/cache/mqd-mpi}
OMPI_VERSION=4.1.4
MPICH_VERSION=4.0.2
OMPI5_VERSION=5.0.7
MPICH42_VERSION=4.2.1
# The install directory of MPICH 4.0.2 built with ch4:ofi (mpich-<this>), beside ch3's mpich-4.0.2.
MPICH_CH4_VERSION=$MPICH_VERSION-ch4
# Debian trixie's source versions of those two (its mpich is upstream 4.2.1 renumbered).
OMPI5_DEBVER=5.0.7-1
MPICH42_DEBVER=4.3.0+really4.2.1-1
# The sha256 of each known form of MPICH 4.2.1's tarball: mpich.org's release (the sum Spack's
# mpich package records for 4.2.1), and this project's shared copy (upstream's git tag v4.2.1
# with its submodules, autogen run, yaksa at depth 1, as the README beside it says).
MPICH42_SHA256S=(23331b2299f287c3419727edc2df8922d7e7abbb9fd0ac74e03b9966f9ad42d7
  3fb607101303d555773df442bf4b7c4402bdb64845a8c02a98a37b7a068316af)
MPICH42_URL=https://www.mpich.org/static/downloads/4.2.1/mpich-4.2.1.tar.gz
UCX_VERSION=1.13.1
UCX_PREFIX=$MQD_MPI_CACHE/ucx-$UCX_VERSION
OPENMP_VERSION=16.0.6
OPENMP_PREFIX=${MQD_OPENMP_PREFIX:-$MQD_MPI_CACHE/llvm-openmp-$OPENMP_VERSION}
JOBS=${MQD_BUILD_JOBS:-$(nproc)}
here=$(cd "$(dirname "$0")/.." && pwd)
# Local sources folders, searched in order (colon-separated): the project's shared folder beside
# the checkout, then one a site pre-seeds in the MPI cache.
MQD_SOURCES_DIR=${MQD_SOURCES_DIR:-$here/../shared/sources:$MQD_MPI_CACHE/sources}
log() { printf '[provision] %s\n' "$*" >&2; }
t0=$(date +%s)

want_node=1; only_apt=0; only=all; want_openmp=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-node) want_node=0 ;;
    --only-apt) only_apt=1 ;;
    --no-openmp) want_openmp=0 ;;
    --only)
      [ $# -ge 2 ] || { echo "MQD_E_USAGE: --only needs a list of MPI builds (openmpi,mpich,mpichch4,openmpi5,mpich42)" >&2; exit 2; }
      for m in ${2//,/ }; do
        case "$m" in openmpi|mpich|mpichch4|openmpi5|mpich42) ;;
          *) echo "MQD_E_USAGE: --only $m: not an MPI build (use openmpi, mpich, mpichch4, openmpi5 or mpich42)" >&2; exit 2 ;;
        esac
      done
      only=",$2,"; shift ;;
    *) echo "MQD_E_USAGE: unknown option $1 (use --no-node, --only-apt, --only MPI[,MPI...] or --no-openmp)" >&2; exit 2 ;;
  esac
  shift
done
# wanted NAME: this run provisions the MPI build NAME (all of them unless --only names others).
wanted() { [ "$only" = all ] || [[ "$only" == *",$1,"* ]]; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# ---- 1. Debian packages ------------------------------------------------------------
PKGS=(build-essential gfortran dpkg-dev file elfutils libdw1 libdw-dev libelf-dev dwz chromium
      sqlite3 iproute2 procps perl python3 python3-mpi4py autoconf automake libtool xz-utils bzip2 ca-certificates openssl util-linux
      slurmctld slurmd slurm-client munge cmake clang-16 libomp-16-dev gdb
      libpmix-dev  # Slurm's mpi/pmix plugin dlopens pmix2/lib/libpmix.so, which only the -dev package ships
      # MPICH ch4:ofi links Debian's libfabric with its static dependencies (pkg-config --static)
      libfabric-dev librdmacm-dev libibverbs-dev libpsm2-dev libpsm-infinipath1-dev
      libhwloc-dev libevent-dev  # the MPI builds link Debian's hwloc; Open MPI also its libevent
      postgresql-15 haproxy  # the PostgreSQL store's tests start their own server; haproxy fronts several aggregators
      systemd)  # systemd-analyze verifies docs/deploy/mqd-agent.service (no systemd needs to run)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
apt_updated=0
apt_update() { if [ $apt_updated = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi; }
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  apt_update
  # debconf's "delaying package configuration" notice is expected on a minimal image: not shown.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" 2>&1 >/dev/null \
    | { grep -v '^debconf: delaying package configuration' || true; } >&2
else
  log "Debian packages: all present"
fi
[ $only_apt = 1 ] && exit 0

# ---- 2. debug-enabled MPI builds ----------------------------------------------------
ensure_deb_src() {
  if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
    return
  fi
  log "enabling bookworm deb-src in /etc/apt/sources.list.d/mqd-deb-src.sources"
  as_root tee /etc/apt/sources.list.d/mqd-deb-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt_updated=0
}

# trixie's deb-src only: no `deb` line, and a -1 pin on top, so apt can fetch trixie's source
# packages (by exact version: `apt-get source -t trixie` is refused while no trixie binary
# release is configured) but never install anything from trixie.
ensure_trixie_src() {
  local list=/etc/apt/sources.list.d/mqd-deb-src-trixie.sources pin=/etc/apt/preferences.d/mqd-trixie-src
  if [ ! -f "$pin" ]; then
    as_root tee "$pin" >/dev/null <<'PIN'
Package: *
Pin: release n=trixie
Pin-Priority: -1
PIN
  fi
  [ -f "$list" ] && return
  log "enabling trixie deb-src (source packages only, pinned -1) in $list"
  as_root tee "$list" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt_updated=0
}

# fetch_orig SRCPKG ORIGVERSION [DEBVERSION]: downloads Debian's source package (bookworm's,
# or exactly DEBVERSION) and prints the orig tarball; prints nothing if DEBVERSION's files
# cannot be fetched (the caller decides), fails for bookworm's.
fetch_orig() {
  local pkg=$1 ver=$2 debver=${3:-} dir="$MQD_MPI_CACHE/src"
  mkdir -p "$dir"
  local tarball spec=$pkg
  # Without DEBVERSION: bookworm's own source version, by name. A bare `apt-get source PKG` takes
  # the newest version any deb-src entry lists, and once trixie's entry is there that is trixie's
  # (openmpi 5.0.7 instead of 4.1.4: a fresh machine then found no 4.1.4 tarball).
  [ -z "$debver" ] && debver=$(apt-cache madison "$pkg" | awk -F'|' '$3 ~ / bookworm\/main Sources/ {gsub(/ /, "", $2); print $2; exit}')
  [ -n "$debver" ] && spec="$pkg=$debver"
  tarball=$(ls "$dir"/"${pkg}_${ver}".orig.tar.* 2>/dev/null | head -n1 || true)
  if [ -z "$tarball" ]; then
    log "apt-get source --download-only $spec"
    (cd "$dir" && apt-get source --download-only -qq "$spec" 2>&1 >/dev/null | grep -v 'unsandboxed' >&2 || true)
    tarball=$(ls "$dir"/"${pkg}_${ver}".orig.tar.* 2>/dev/null | head -n1 || true)
    if [ -z "$tarball" ] && [ -z "${3:-}" ]; then
      echo "MQD_E_PROVISION: no ${pkg}_${ver}.orig.tar.* after apt-get source $spec; is deb-src for bookworm reachable (apt-cache madison $pkg lists bookworm/main Sources)?" >&2; exit 1
    fi
  fi
  echo "$tarball"
}

# check_sha256 FILE SUM...: succeeds when FILE's sha256 is one of SUMS; otherwise says which
# file, its sum and the known ones (MQD_E_SOURCE_CHECKSUM) and fails: nothing is built from it.
check_sha256() {
  local file=$1 sum k; shift
  sum=$(sha256sum "$file" | cut -d' ' -f1)
  for k in "$@"; do [ "$sum" = "$k" ] && return 0; done
  echo "MQD_E_SOURCE_CHECKSUM: $file has sha256 $sum, expected $(echo "$@" | sed 's/ / or /g') (MPICH $MPICH42_VERSION's known tarballs); the file is damaged or another release, so nothing was built from it. Replace it with a good copy, or set MQD_MPICH42_SHA256 to the sum of your site's own repack." >&2
  return 1
}
mpich42_sums() { echo "${MPICH42_SHA256S[@]}" "${MQD_MPICH42_SHA256:-}"; }

# MPICH 4.2.1's source, 1. an explicit tarball (checked); prints nothing when none is set.
mpich42_explicit() {
  [ -n "${MQD_MPICH42_TARBALL:-}" ] || return 0
  if [ ! -f "$MQD_MPICH42_TARBALL" ]; then
    echo "MQD_E_PROVISION_MPICH42: MQD_MPICH42_TARBALL=$MQD_MPICH42_TARBALL is not a file; point it at mpich-$MPICH42_VERSION.tar.gz or unset it" >&2
    return 1
  fi
  # shellcheck disable=SC2046
  check_sha256 "$MQD_MPICH42_TARBALL" $(mpich42_sums) || return 1
  log "mpich $MPICH42_VERSION: source from MQD_MPICH42_TARBALL ($MQD_MPICH42_TARBALL, sha256 checked)"
  echo "$MQD_MPICH42_TARBALL"
}

# 2.-4.: Debian's source package, the local sources folder, upstream's release. Prints the
# tarball, or fails with MQD_E_PROVISION_MPICH42 saying what was tried.
mpich42_found() {
  local t
  local dl="$MQD_MPI_CACHE/src/mpich-$MPICH42_VERSION.tar.gz" debian_note upstream_note
  mkdir -p "$MQD_MPI_CACHE/src"
  t=$(fetch_orig mpich "${MPICH42_DEBVER%-*}" "$MPICH42_DEBVER" 2>>"$MQD_MPI_CACHE/src/apt-source.log")
  if [ -n "$t" ]; then
    # apt-get source has checked it against the .dsc, whose sums the signed archive vouches for.
    log "mpich $MPICH42_VERSION: source from Debian's mpich=$MPICH42_DEBVER ($(basename "$t"), checked by apt)"
    echo "$t"; return 0
  fi
  debian_note="Debian's source package mpich=$MPICH42_DEBVER: not served by this archive mirror"
  # An expected miss on this platform: one calm line, the details in the log above.
  log "mpich $MPICH42_VERSION: Debian's source package is not served here (apt's words in $MQD_MPI_CACHE/src/apt-source.log); trying $MQD_SOURCES_DIR"
  local d dirs
  IFS=: read -ra dirs <<<"$MQD_SOURCES_DIR"
  for d in "${dirs[@]}"; do
    t="$d/mpich-$MPICH42_VERSION.tar.gz"
    [ -f "$t" ] || continue
    # shellcheck disable=SC2046
    check_sha256 "$t" $(mpich42_sums) || return 1
    log "mpich $MPICH42_VERSION: source from the local sources folder ($t, sha256 checked)"
    echo "$t"; return 0
  done
  if [ ! -f "$dl" ]; then
    log "mpich $MPICH42_VERSION: not in $MQD_SOURCES_DIR; downloading $MPICH42_URL"
    mkdir -p "$(dirname "$dl")"
    if curl -fsSL --connect-timeout 15 --max-time 1200 -o "$dl.part" "$MPICH42_URL" 2>/dev/null; then
      mv "$dl.part" "$dl"
    else
      rm -f "$dl.part"
    fi
  fi
  if [ -f "$dl" ]; then
    # shellcheck disable=SC2046
    check_sha256 "$dl" $(mpich42_sums) || { rm -f "$dl"; return 1; }
    log "mpich $MPICH42_VERSION: source from $MPICH42_URL (sha256 checked)"
    echo "$dl"; return 0
  fi
  upstream_note="$MPICH42_URL: not reachable"
  echo "MQD_E_PROVISION_MPICH42: no MPICH $MPICH42_VERSION source. Tried MQD_MPICH42_TARBALL (not set); $debian_note; mpich-$MPICH42_VERSION.tar.gz in $MQD_SOURCES_DIR: absent; $upstream_note. Put upstream's mpich-$MPICH42_VERSION.tar.gz in a folder of MQD_SOURCES_DIR ($MQD_SOURCES_DIR) or set MQD_MPICH42_TARBALL to it, then run again (or leave the build out: --only with the others)." >&2
  return 1
}

# The stamp's second line: the configure arguments a build was made with, one line.
stamp_line() { printf 'configure %s\n' "$*"; }
# CPU time each build takes on this kind of machine (a cold run, two lanes on an idle
# 2-core machine, as cpu_seconds logs it: Open MPI 5.0.7 643 CPU-s, 4.1.4 632, MPICH 4.0.2 ch4
# 515, 4.2.1 486, ch3 359): an estimate to print; every build logs its own when it is done.
build_cpu_minutes() {
  case "$1" in
    openmpi-4.1.4) echo 11 ;; mpich-4.0.2) echo 6 ;; mpich-4.0.2-ch4) echo 9 ;;
    openmpi-5.0.7) echo 11 ;; mpich-4.2.1) echo 8 ;; ucx-1.13.1) echo 5 ;; *) echo '?' ;;
  esac
}

# build NAME VERSION TARBALL CONFIGURE_ARGS...   (runs in the background, in one of the lanes
# below, with make -j$BUILD_JOBS)
build_mpi() {
  local name=$1 ver=$2 tarball=$3; shift 3
  local prefix="$MQD_MPI_CACHE/$name-$ver" stamp="$MQD_MPI_CACHE/$name-$ver/.mqd-built"
  local work b0
  work="$MQD_MPI_CACHE/build/$name-$ver"
  rm -rf "$work" "$prefix" "$MQD_MPI_CACHE/build/$name-$ver.failed"; mkdir -p "$work"
  log "$name $ver: building from $(basename "$tarball") into $prefix (~$(build_cpu_minutes "$name-$ver") CPU-minutes; logs: $work/build.log)"
  b0=$(date +%s)
  # A line a minute while it builds, so a first run never looks stuck.
  ( while sleep 60 </dev/null >/dev/null 2>&1; do log "$name $ver: still building, $(( ($(date +%s) - b0) / 60 )) min so far"; done ) &
  local ticker=$!
  tar -xf "$tarball" -C "$work" --strip-components=1
  (
    cd "$work"
    if [ -n "${PRE_CONFIGURE:-}" ]; then "$PRE_CONFIGURE" >build.log 2>&1 || exit 1; fi
    ./configure --prefix="$prefix" "$@" >>build.log 2>&1 \
      && make -j"$BUILD_JOBS" >>build.log 2>&1 \
      && make install >>build.log 2>&1 \
      && times >cpu-times
  ) || { kill "$ticker" 2>/dev/null; touch "$MQD_MPI_CACHE/build/$name-$ver.failed"; echo "MQD_E_PROVISION: $name build failed; see the end of $work/build.log" >&2; tail -n 30 "$work/build.log" >&2; exit 1; }
  kill "$ticker" 2>/dev/null || true
  { date -u +%FT%TZ; stamp_line "$@"; } >"$stamp"
  log "$name $ver: built in $(( $(date +%s) - b0 )) s, $(cpu_seconds "$work/cpu-times") CPU-s"
  rm -rf "$work"
}

# The CPU seconds (user + system) of a build's commands, from the `times` its subshell wrote:
# the second line is its children's, "XmY.YYYs XmY.YYYs".
cpu_seconds() {
  sed -n 2p "$1" 2>/dev/null | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] } printf "%d", t }'
}

# MPICH 4.2.1's datatype engine yaksa generates pack/unpack code for every pair of nested
# types up to depth 3: 436 files, 105 MB of C, most of the build. MPICH's own autogen knows
# `-yaksa-depth=N` for this; depth 1 keeps the specialised code for one level of nesting and
# sends deeper types down yaksa's generic path (same results, slower packing of deeply nested
# derived types, which no message-queue read touches). Needs python3 and autotools.
yaksa_shallow() {
  local depth=${MQD_MPICH42_YAKSA_DEPTH:-1}
  [ "$depth" = full ] && return 0
  # A tarball generated at depth 1 already (the shared copy) has ~80 of these files, not 436.
  local have
  have=$(ls modules/yaksa/src/backend/seq/pup/yaksuri_seqi_pup_*.c 2>/dev/null | wc -l)
  if [ "$depth" = 1 ] && [ "$have" -gt 0 ] && [ "$have" -le 120 ]; then
    log "mpich $MPICH42_VERSION: yaksa already generated at depth 1 ($have pack/unpack files)"
    return 0
  fi
  log "mpich $MPICH42_VERSION: regenerating yaksa with -yaksa-depth=$depth (MQD_MPICH42_YAKSA_DEPTH=full keeps the tarball's)"
  (cd modules/yaksa && rm -f src/backend/seq/pup/yaksuri_seqi_pup_*.c && ./autogen.sh --pup-max-nesting="$depth")
}

# ---- 3. LLVM's OpenMP runtime with OMPD ----------------------------------------------
# Debian's libomp.so is stripped: the ompd_* symbols libompd.so looks up are LOCAL, only in
# .symtab (packages/mqd-core/REFERENCE.md, "OpenMP (OMPD)"). Built from Debian's own source, the
# runtime keeps .symtab. Only openmp/ and the shared CMake modules are extracted, only the omp
# and ompd targets are built (about 20 s on 2 cores), and only the four files the fixtures and
# the OMPD reader need are installed. $ORIGIN: libompd.so needs libomp.so beside it at dlopen.
build_openmp() {
  local tarball=$1 prefix=$OPENMP_PREFIX b0 work
  # Beside the prefix (the cache's build/ by default), so a prefix elsewhere builds elsewhere.
  work="$(dirname "$prefix")/build/$(basename "$prefix")"
  rm -rf "$work" "$prefix"; mkdir -p "$work"
  log "llvm-openmp $OPENMP_VERSION: building from $(basename "$tarball") into $prefix (logs: $work/build.log)"
  b0=$(date +%s)
  (
    cd "$work"
    # Three directories (with all below them) of the 136 MB tarball: openmp, cmake, llvm/cmake.
    tar -xf "$tarball" --strip-components=1 --wildcards --no-wildcards-match-slash \
      '*/openmp' '*/cmake' '*/llvm/cmake' \
      && cmake -S openmp -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
        -DLIBOMP_OMPD_SUPPORT=ON -DOPENMP_ENABLE_LIBOMPTARGET=OFF -DLIBOMP_USE_HWLOC=OFF \
        -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON >build.log 2>&1 \
      && make -C build -j"$JOBS" omp ompd >>build.log 2>&1 \
      && install -D -m 0644 build/runtime/src/libomp.so "$prefix/lib/libomp.so" \
      && install -D -m 0644 build/libompd/src/libompd.so "$prefix/lib/libompd.so" \
      && install -D -m 0644 build/runtime/src/omp.h "$prefix/include/omp.h" \
      && install -D -m 0644 build/runtime/src/omp-tools.h "$prefix/include/omp-tools.h"
  ) || { echo "MQD_E_PROVISION: llvm-openmp build failed; see the end of $work/build.log" >&2; tail -n 30 "$work/build.log" >&2; exit 1; }
  date -u +%FT%TZ >"$prefix/.mqd-built"
  rm -rf "$work"
  log "llvm-openmp $OPENMP_VERSION: built in $(( $(date +%s) - b0 )) s"
}

mkdir -p "$MQD_MPI_CACHE"
# One provisioning at a time: a second run would see the same stamps missing and rm -rf the
# first one's build directories under it.
exec 9>"$MQD_MPI_CACHE/.provision.lock"
if ! flock -n 9; then
  log "another provisioning holds $MQD_MPI_CACHE/.provision.lock; waiting for it"
  flock 9
fi
# The OpenMP runtime builds in the background beside the MPI builds (its own pid in pids).
pids=()
if [ $want_openmp = 0 ]; then
  :
elif [ -f "$OPENMP_PREFIX/.mqd-built" ]; then
  log "llvm-openmp $OPENMP_VERSION: present in $OPENMP_PREFIX; nothing to build"
else
  openmp_tar=${MQD_OPENMP_TARBALL:-}
  if [ -z "$openmp_tar" ]; then
    ensure_deb_src
    apt_update
    openmp_tar=$(fetch_orig llvm-toolchain-16 "$OPENMP_VERSION")
  fi
  build_openmp "$openmp_tar" &
  pids+=($!)
fi
# UCX 1.13.1 (bookworm's): -g for its DWARF types, which the UCX queue reader reads the worker's
# tag-matching state with (Debian's binary packages carry none); its own defaults otherwise
# (shared memory and TCP here; verbs and rdmacm as Debian's package, which this machine's
# libibverbs-dev and librdmacm-dev give), no Java or Go bindings, no GPU support, no docs.
UCX_ARGS=(CFLAGS="-g -O2" CXXFLAGS="-g -O2"
  --disable-static --enable-shared --disable-doxygen-doc --without-java --without-go
  --without-cuda --without-rocm --without-knem --without-xpmem --without-fuse3)
# Debian's orig tarball is upstream's git tree: no configure, and configure.ac links files of a
# debian/ folder that the tree keeps as debian.upstream (Debian's own packaging replaces it).
ucx_autogen() {
  [ -x ./configure ] && return 0
  [ -d debian ] || [ ! -d debian.upstream ] || cp -r debian.upstream debian
  ./autogen.sh
}
# The Open MPI builds wait for UCX's (they link it); a failed UCX build fails them too.
wait_ucx() {
  while [ ! -f "$UCX_PREFIX/.mqd-built" ]; do
    [ ! -f "$MQD_MPI_CACHE/build/ucx-$UCX_VERSION.failed" ] || { echo "UCX $UCX_VERSION failed to build" >&2; return 1; }
    sleep 5
  done
}
# Each build's configure arguments. The stamp records them (its second line), so a build made
# with other arguments is built again instead of being taken as it is.
# Open MPI 4.1.4: trimmed configure, -g, Debian's hwloc and libevent (as Debian's own openmpi
# package; the bundled copies cost a configure and ~150 files each build), its own
# internal PMIx; Fortran (mpif.h, use mpi, mpi_f08) and the C++ wrapper compiler; UCX's pml
# (chosen at run time with --mca pml ucx; ob1 stays the default on a machine without InfiniBand),
# without UCX's btl and one-sided components, which no test uses.
OMPI_ARGS=(CFLAGS="-g -O2" CXXFLAGS="-g -O2" FCFLAGS="-g -O2"
  --enable-mpi-fortran=all --disable-oshmem --disable-mpi-java
  --with-ucx="$UCX_PREFIX" --enable-mca-no-build=btl-uct,osc-ucx
  --without-ofi --without-verbs --without-psm --without-psm2 --without-cuda
  --with-hwloc=external --with-libevent=external --with-pmix=internal
  --disable-io-romio --disable-man-pages --enable-shared --disable-static)
# MPICH 4.0.2 with ch3:nemesis (4.0's other device), Fortran (gfortran >= 10 needs
# -fallow-argument-mismatch for the mpif.h bindings, and configure stops without it) and C++:
# MPICH 4.0.2's language bindings for the Fortran/C++ fixtures. Debian's hwloc and no ROMIO
# (MPI-IO, which no fixture uses), as MPICH 4.2.1.
MPICH_ARGS=(CFLAGS="-g -O2" CXXFLAGS="-g -O2"
  FFLAGS="-g -O2 -fallow-argument-mismatch" FCFLAGS="-g -O2 -fallow-argument-mismatch"
  --enable-debuginfo --enable-shared --disable-static
  --with-device=ch3:nemesis --enable-fortran=all --enable-cxx --disable-doc
  --with-hwloc=/usr --disable-romio --without-ucx --without-libfabric)
# MPICH 4.0.2 with ch4, MPICH 4.x's default device: ch4:ofi over Debian's libfabric (its tcp
# provider brings a one-node job up; ch4's posix shared-memory module carries the messages).
# No Fortran or C++ bindings: they are the ch3 build's, which the language fixtures use
# (languages.mpi.test.ts, SAME_BINDINGS_AS); no ROMIO; Debian's hwloc. The datatype
# engine is dataloop (ch3's): ch4 defaults to yaksa, ~600 generated pack/unpack files that
# double the build, and nothing the queue DLL reads depends on it (docs/mpi-facts.md, "MPICH ch4").
MPICH_CH4_ARGS=(CFLAGS="-g -O2" CXXFLAGS="-g -O2"
  --enable-debuginfo --enable-shared --disable-static
  --with-device=ch4:ofi --with-libfabric=/usr --without-ucx --with-datatype-engine=dataloop
  --enable-fortran=no --disable-cxx --disable-doc --with-hwloc=/usr --disable-romio)
# Open MPI 5: its bundled PMIx and PRRTE (prterun is its mpirun), Debian's hwloc and libevent,
# Fortran (mpif.h, use mpi, mpi_f08); the C++ bindings no longer exist in 5.x (mpicxx is a
# wrapper around the C API). No ROMIO, no OpenSHMEM, no fabrics beyond shared memory/TCP and
# UCX's pml, as 4.1.4.
OMPI5_ARGS=(CFLAGS="-g -O2" CXXFLAGS="-g -O2" FCFLAGS="-g -O2"
  --enable-mpi-fortran=all --disable-oshmem --disable-mpi-java
  --with-ucx="$UCX_PREFIX" --enable-mca-no-build=btl-uct,osc-ucx
  --without-ofi --without-psm2 --without-cuda --without-ucc --without-hcoll
  --with-hwloc=external --with-libevent=external --with-pmix=internal --with-prrte=internal
  --disable-io-romio --enable-shared --disable-static)
# MPICH 4.2.1: its default ch4 device, ch4:ofi over Debian's libfabric (1.17, as MPICH 4.0.2's
# ch4 build; the libfabric embedded in the tarball builds all of its 21 providers, opx, psm3,
# verbs, efa...) and Debian's hwloc (libhwloc-dev) instead of the embedded one; no ROMIO
# (MPI-IO: no fixture or test uses it; the Open MPI builds leave it out too); ucx left out.
# Fortran and C++, --enable-debuginfo for libtvmpich.so (the queue DLL). The datatype engine
# stays ch4's yaksa (generated at depth 1, see yaksa_shallow):
# --with-datatype-engine=dataloop configures but libmpi.so then lacks MPIR_Typerep_test and the
# link fails (4.2.1; docs/mpi-facts.md).
MPICH42_ARGS=(CFLAGS="-g -O2" CXXFLAGS="-g -O2" FFLAGS="-g -O2" FCFLAGS="-g -O2"
  --enable-debuginfo --enable-shared --disable-static
  --with-device=ch4:ofi --with-libfabric=/usr --without-ucx
  --enable-fortran=all --enable-cxx --disable-doc --with-hwloc=/usr --disable-romio)

stamp_of() { echo "$MQD_MPI_CACHE/$1-$2/.mqd-built"; }
# built NAME VERSION ARGS...: the build is there and was configured with exactly ARGS.
# A stamp with other arguments (an older checkout's: Open MPI 4.1.4 and MPICH 4.0.2 ch3 had no
# Fortran once) says so, and the build is made again.
built() {
  local st what="$1-$2"
  st=$(stamp_of "$1" "$2"); shift 2
  [ -f "$st" ] || return 1
  grep -qxF -- "$(stamp_line "$@")" "$st" && return 0
  log "$what: built with other configure arguments (an older checkout's); building it again"
  return 1
}
need_ompi=0; need_mpich=0; need_ompi5=0; need_mpich42=0; need_mpichch4=0; need_ucx=0
{ wanted openmpi || wanted openmpi5; } && { built ucx "$UCX_VERSION" "${UCX_ARGS[@]}" || need_ucx=1; }
wanted openmpi && { built openmpi "$OMPI_VERSION" "${OMPI_ARGS[@]}" || need_ompi=1; }
wanted mpich && { built mpich "$MPICH_VERSION" "${MPICH_ARGS[@]}" || need_mpich=1; }
wanted openmpi5 && { built openmpi "$OMPI5_VERSION" "${OMPI5_ARGS[@]}" || need_ompi5=1; }
wanted mpich42 && { built mpich "$MPICH42_VERSION" "${MPICH42_ARGS[@]}" || need_mpich42=1; }
wanted mpichch4 && { built mpich "$MPICH_CH4_VERSION" "${MPICH_CH4_ARGS[@]}" || need_mpichch4=1; }
todo=$((need_ucx + need_ompi + need_mpich + need_ompi5 + need_mpich42 + need_mpichch4))
all_builds="ucx-$UCX_VERSION, openmpi-$OMPI_VERSION, mpich-$MPICH_VERSION, openmpi-$OMPI5_VERSION, mpich-$MPICH42_VERSION, mpich-$MPICH_CH4_VERSION"
[ "$only" = all ] || all_builds="the ones asked for: ${only//,/ }"
if [ $todo = 0 ]; then
  log "MPI builds: present in $MQD_MPI_CACHE ($all_builds); nothing to build"
else
# Sources are fetched first, one after the other (apt's lock). The builds then run in lanes: at
# most $LANES at once (MQD_BUILD_LANES, default the core count), each with make -j twice its
# share of the cores, the biggest first (longest processing time first). Every build at once
# at make -j1 took 1,904 s of provisioning where two lanes take 1,508 s: one build alone takes
# less CPU than its share of that (docs/provisioning.md, "What each build costs"), so at most
# two run at a time, each with the cores of its lane.
LANES=${MQD_BUILD_LANES:-$JOBS}
[ "$LANES" -le "$todo" ] || LANES=$todo
[ "$LANES" -ge 1 ] || LANES=1
BUILD_JOBS=$(( (2 * JOBS + LANES - 1) / LANES ))
[ "$BUILD_JOBS" -ge 1 ] || BUILD_JOBS=1
# An explicit MPICH 4.2.1 tarball is checked before anything else happens.
mpich42_tar=
if [ $need_mpich42 = 1 ]; then mpich42_tar=$(mpich42_explicit) || exit 1; fi
ensure_deb_src
[ $((need_ompi5 + need_mpich42)) = 0 ] || ensure_trixie_src
apt_update
# The queue, biggest build first: NAME|VERSION|TARBALL|ARGS ARRAY|PRE_CONFIGURE. UCX goes first
# and an MPICH build beside it, so the Open MPI builds, which wait for UCX, rarely wait at all.
queue=()
if [ $need_ucx = 1 ]; then
  ucx_tar=$(fetch_orig ucx "$UCX_VERSION")
  queue+=("ucx|$UCX_VERSION|$ucx_tar|UCX_ARGS|ucx_autogen")
fi
[ $((need_mpichch4 + need_mpich)) = 0 ] || mpich_tar=$(fetch_orig mpich "$MPICH_VERSION")
[ $need_ucx = 0 ] || [ $need_mpichch4 = 0 ] || { queue+=("mpich|$MPICH_CH4_VERSION|$mpich_tar|MPICH_CH4_ARGS|"); need_mpichch4=queued; }
if [ $need_ompi5 = 1 ]; then
  ompi5_tar=$(fetch_orig openmpi "$OMPI5_VERSION" "$OMPI5_DEBVER")
  [ -n "$ompi5_tar" ] || { echo "MQD_E_PROVISION: no openmpi_$OMPI5_VERSION.orig.tar.* after apt-get source openmpi=$OMPI5_DEBVER; is deb-src for trixie reachable?" >&2; exit 1; }
  queue+=("openmpi|$OMPI5_VERSION|$ompi5_tar|OMPI5_ARGS|wait_ucx")
fi
if [ $need_ompi = 1 ]; then
  ompi_tar=$(fetch_orig openmpi "$OMPI_VERSION")
  queue+=("openmpi|$OMPI_VERSION|$ompi_tar|OMPI_ARGS|wait_ucx")
fi
# MPICH 4.0.2's one tarball serves both of its builds.
[ "$need_mpichch4" != 1 ] || queue+=("mpich|$MPICH_CH4_VERSION|$mpich_tar|MPICH_CH4_ARGS|")
if [ $need_mpich42 = 1 ]; then
  [ -n "$mpich42_tar" ] || mpich42_tar=$(mpich42_found) || exit 1
  queue+=("mpich|$MPICH42_VERSION|$mpich42_tar|MPICH42_ARGS|yaksa_shallow")
fi
[ $need_mpich = 0 ] || queue+=("mpich|$MPICH_VERSION|$mpich_tar|MPICH_ARGS|")
log "MPI builds: ${#queue[@]} in $LANES lanes, make -j$BUILD_JOBS each, biggest first"
# run_lanes: the queue's builds, $LANES at a time. A failed build starts no more of them; the
# ones running finish (a build killed halfway would leave its directory for the next run to
# remove anyway). Sets lanes_rc.
run_lanes() {
  local running=() spec name ver tarball argsname pre fin st keep x
  lanes_rc=0
  for spec in "${queue[@]}"; do
    while [ ${#running[@]} -ge "$LANES" ]; do
      st=0; wait -n -p fin "${running[@]}" || st=$?
      [ $st = 0 ] || lanes_rc=1
      keep=(); for x in "${running[@]}"; do [ "$x" = "$fin" ] || keep+=("$x"); done
      running=("${keep[@]}")
    done
    [ $lanes_rc = 0 ] || break
    IFS='|' read -r name ver tarball argsname pre <<<"$spec"
    local -n args_ref=$argsname
    PRE_CONFIGURE=$pre build_mpi "$name" "$ver" "$tarball" "${args_ref[@]}" &
    running+=($!)
    unset -n args_ref
  done
  for x in "${running[@]}"; do wait "$x" || lanes_rc=1; done
}
run_lanes
[ $lanes_rc = 0 ] || { wait; exit 1; }
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc = 0 ] || exit 1
built=()
for b in "ucx-$UCX_VERSION" "openmpi-$OMPI_VERSION" "mpich-$MPICH_VERSION" "openmpi-$OMPI5_VERSION" "mpich-$MPICH42_VERSION" "mpich-$MPICH_CH4_VERSION"; do
  [ -f "$MQD_MPI_CACHE/$b/.mqd-built" ] && built+=("$b")
done
log "MPI cache: $MQD_MPI_CACHE (built: ${built[*]})"
[ -f "$OPENMP_PREFIX/.mqd-built" ] && log "OpenMP runtime with OMPD: $OPENMP_PREFIX"

# ---- 4. node modules --------------------------------------------------------------
if [ $want_node = 1 ]; then
  cd "$here"
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "installing node modules"
    # npm install (not npm ci): it follows package-lock.json, and npm 11 here leaves other
    # platforms' optional binaries (biome, turbo) out of the lock file, which npm ci refuses.
    npm install --no-audit --no-fund --loglevel=error
  else
    log "node modules: up to date"
  fi
fi
log "done in $(( $(date +%s) - t0 )) s"
