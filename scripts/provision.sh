#!/usr/bin/env bash
# Provision everything MQD Dashboard needs on a Debian bookworm machine, idempotently and
# without prompts:
#   1. Debian packages (compiler, elfutils/libdw, dwz, chromium for e2e, sqlite, iproute2)
#   2. bookworm deb-src, then Debian's source packages of Open MPI 4.1.4 and MPICH 4.0.2,
#      built with -g from the pristine upstream tarball (*.orig.tar.*) into a cache outside
#      the repository ($MQD_MPI_CACHE, default /var/cache/mqd-mpi)
#   3. node modules (npm ci / npm install)
# A second run does nothing: each step checks a stamp or the installed state first.
# Usage: scripts/provision.sh [--no-node] [--only-apt]
set -euo pipefail

MQD_MPI_CACHE=${MQD_MPI_CACHE:-/var/cache/mqd-mpi}
OMPI_VERSION=4.1.4
MPICH_VERSION=4.0.2
JOBS=${MQD_BUILD_JOBS:-$(nproc)}
here=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[provision] %s\n' "$*" >&2; }
t0=$(date +%s)

want_node=1; only_apt=0
for a in "$@"; do
  case "$a" in
    --no-node) want_node=0 ;;
    --only-apt) only_apt=1 ;;
    *) echo "MQD_E_USAGE: unknown option $a (use --no-node or --only-apt)" >&2; exit 2 ;;
  esac
done

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# ---- 1. Debian packages ------------------------------------------------------------
PKGS=(build-essential dpkg-dev file elfutils libdw1 libdw-dev libelf-dev dwz chromium
      sqlite3 iproute2 procps perl python3 xz-utils bzip2 ca-certificates openssl util-linux
      slurmctld slurmd slurm-client munge)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
apt_updated=0
apt_update() { if [ $apt_updated = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi; }
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  apt_update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

# fetch_orig SRCPKG VERSION: downloads Debian's source package and prints the orig tarball
fetch_orig() {
  local pkg=$1 ver=$2 dir="$MQD_MPI_CACHE/src"
  mkdir -p "$dir"
  local tarball
  tarball=$(ls "$dir"/"${pkg}_${ver}".orig.tar.* 2>/dev/null | head -n1 || true)
  if [ -z "$tarball" ]; then
    log "apt-get source --download-only $pkg (Debian bookworm)"
    (cd "$dir" && apt-get source --download-only -qq "$pkg" 2>&1 >/dev/null | grep -v 'unsandboxed' >&2 || true)
    tarball=$(ls "$dir"/"${pkg}_${ver}".orig.tar.* 2>/dev/null | head -n1 || true)
    [ -n "$tarball" ] || { echo "MQD_E_PROVISION: no ${pkg}_${ver}.orig.tar.* after apt-get source; is deb-src for bookworm reachable?" >&2; exit 1; }
  fi
  echo "$tarball"
}

# build NAME VERSION TARBALL CONFIGURE_ARGS...   (runs in the background, two at once)
build_mpi() {
  local name=$1 ver=$2 tarball=$3; shift 3
  local prefix="$MQD_MPI_CACHE/$name-$ver" stamp="$MQD_MPI_CACHE/$name-$ver/.mqd-built"
  local work b0
  work="$MQD_MPI_CACHE/build/$name-$ver"
  rm -rf "$work" "$prefix"; mkdir -p "$work"
  log "$name $ver: building from $(basename "$tarball") into $prefix (logs: $work/build.log)"
  b0=$(date +%s)
  tar -xf "$tarball" -C "$work" --strip-components=1
  (
    cd "$work"
    ./configure --prefix="$prefix" "$@" >build.log 2>&1 \
      && make -j"$JOBS" >>build.log 2>&1 \
      && make install >>build.log 2>&1
  ) || { echo "MQD_E_PROVISION: $name build failed; see the end of $work/build.log" >&2; tail -n 30 "$work/build.log" >&2; exit 1; }
  date -u +%FT%TZ >"$stamp"
  rm -rf "$work"
  log "$name $ver: built in $(( $(date +%s) - b0 )) s"
}

mkdir -p "$MQD_MPI_CACHE"
ompi_stamp="$MQD_MPI_CACHE/openmpi-$OMPI_VERSION/.mqd-built"
mpich_stamp="$MQD_MPI_CACHE/mpich-$MPICH_VERSION/.mqd-built"
if [ -f "$ompi_stamp" ] && [ -f "$mpich_stamp" ]; then
  log "MPI builds: present in $MQD_MPI_CACHE (openmpi-$OMPI_VERSION, mpich-$MPICH_VERSION); nothing to build"
else
# Sources are fetched one after the other (apt's lock), the builds then run side by side.
ensure_deb_src
apt_update
ompi_tar=$(fetch_orig openmpi "$OMPI_VERSION")
mpich_tar=$(fetch_orig mpich "$MPICH_VERSION")
# Open MPI: trimmed configure, -g, internal hwloc/libevent/pmix so no -dev packages are needed.
[ -f "$ompi_stamp" ] || build_mpi openmpi "$OMPI_VERSION" "$ompi_tar" \
  CFLAGS="-g -O2" --disable-mpi-fortran --disable-oshmem --disable-mpi-java \
  --without-ucx --without-ofi --without-verbs --without-psm --without-psm2 --without-cuda \
  --with-hwloc=internal --with-libevent=internal --with-pmix=internal \
  --disable-io-romio --disable-man-pages --enable-shared --disable-static &
ompi_pid=$!
[ -f "$mpich_stamp" ] || build_mpi mpich "$MPICH_VERSION" "$mpich_tar" \
  CFLAGS="-g -O2" --enable-debuginfo --enable-shared --disable-static \
  --with-device=ch3:nemesis --disable-fortran --disable-cxx --disable-doc \
  --with-hwloc=embedded --without-ucx --without-libfabric &
mpich_pid=$!
rc=0
wait $ompi_pid || rc=1
wait $mpich_pid || rc=1
[ $rc = 0 ] || exit 1
fi
log "MPI cache: $MQD_MPI_CACHE (openmpi-$OMPI_VERSION, mpich-$MPICH_VERSION)"

# ---- 3. node modules --------------------------------------------------------------
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
