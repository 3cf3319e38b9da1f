#!/usr/bin/env bash
# Build the harness's images, each tagged by the hash of what goes into it (SWE-bench style):
#   harness-<image>:<hash>  and  harness-<image>:latest
# An image whose tag already exists is not rebuilt. Prints one tag per line on stdout (logs go to stderr).
#
#   scripts/build-images.sh [--tags-only] [cpu] [calculator] [gpu] [all]      (default: cpu calculator)
#
# The hash covers the Dockerfile, the files the build copies (locks, harness sources, benchmarks, pyproject.toml,
# the helper scripts in docker/context/), the names of the wheels in the wheelhouse and the base image (its
# reference, and its layers' digests when it is a local image). `--tags-only` prints the tags without building.
#
# Environment:
#   HARNESS_BASE_IMAGE      base of every image (default: harness-base:bookworm when that image exists, made by
#                           scripts/docker-setup.sh; else the Dockerfiles' digest-pinned default)
#   HARNESS_GPU_BASE_IMAGE  base of the GPU image only (e.g. a digest-pinned CUDA image; default: as above)
#   HARNESS_EXTRA_CA        PEM file of extra CA certificates for pip in the build (a BuildKit secret, never in a
#                           layer); default: pip's configured `cert` (PIP_CERT or `pip config get global.cert`)
#   HARNESS_PIP_CONF        a pip.conf for the build (a secret: put index credentials here, not in build args)
#   PIP_INDEX_URL, PIP_EXTRA_INDEX_URL   passed as build arguments (recorded in the image history: no credentials)
#   HARNESS_BUILD_CACHE_KEEP  BuildKit cache kept after a build (default 20GB: the GPU image's environment layers; the rest is pruned)
#   HARNESS_BUILD_NO_CACHE  set: build every layer again, existing tags too (bench/image_disk.py measures so)
#   HARNESS_WHEELHOUSE      folder(s) (:-separated) searched for the pinned CPU torch wheel; default: pip's
#                           find-links. Wheels in docker/context/wheels/ (git-ignored) are always added.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache/docker
LOCAL_BASE=harness-base:bookworm

log() { echo "== build-images: $*" >&2; }
die() { echo "build-images: $*" >&2; exit 1; }

tags_only=0
images=()
for arg in "$@"; do
    case "$arg" in
        --tags-only) tags_only=1 ;;
        all) images+=(calculator cpu gpu) ;;
        cpu|calculator|gpu) images+=("$arg") ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown image '$arg' (cpu, calculator, gpu, all)" ;;
    esac
done
[ ${#images[@]} -gt 0 ] || images=(calculator cpu)

# --- which files each image is built from (paths relative to the repository root) --------------------------------
inputs() {
    case "$1" in
        calculator) echo docker/Dockerfile.calculator docker/context/build-env.sh locks/calculator.txt ;;
        cpu) echo docker/Dockerfile.cpu docker/context/build-env.sh docker/context/hardlink-duplicates.py \
                  locks/harness.txt locks/serve-cpu.txt locks/calculator.txt requirements/models.in \
                  pyproject.toml README.md harness benchmarks ;;
        gpu) echo docker/Dockerfile.gpu docker/context/build-env.sh docker/requirements/gpu.lock \
                  docker/requirements/gpu-calculator.lock docker/requirements/gpu-convert.lock \
                  pyproject.toml README.md harness benchmarks ;;
    esac
}

# --- the CPU torch wheel: pip's find-links folders, or HARNESS_WHEELHOUSE -----------------------------------------
find_links() {
    if [ -n "${HARNESS_WHEELHOUSE:-}" ]; then tr ':' '\n' <<<"$HARNESS_WHEELHOUSE"; return; fi
    { echo "${PIP_FIND_LINKS:-}"; python3 -m pip config list 2>/dev/null | sed -n "s/^[a-z:.]*find-links='\(.*\)'$/\1/p"; } \
        | tr ' ' '\n' | sed 's#^file://##' | grep -v '^$' || true
}

torch_wheel() {
    local version dir
    version=$(sed -n 's/^torch==\([^ ;]*\).*/\1/p' locks/serve-cpu.txt | head -1)
    [ -n "$version" ] || return 0
    while read -r dir; do
        [ -d "$dir" ] || continue
        ls "$dir"/torch-"$version"-cp311-cp311-*linux*x86_64.whl 2>/dev/null | head -1
    done < <(find_links) | head -1
}

# --- stage a minimal build context: exactly the inputs, plus wheels/ ------------------------------------------------
# Each call of this script stages into a folder of its own (STAGING, removed on exit): two at once (the tests ask for
# the tags from two pytest processes while a run picks its backend) would otherwise empty each other's context and
# hash half of it.
stage() {
    local image=$1 ctx=$STAGING/$1 path wheel
    mkdir -p "$ctx/wheels"
    for path in $(inputs "$image"); do
        [ -e "$path" ] || die "$path is missing (needed by the $image image)"
        mkdir -p "$ctx/$(dirname "$path")"
        if [ -d "$path" ]; then
            (cd "$ROOT" && find "$path" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0) \
                | (cd "$ROOT" && xargs -0 -r cp --parents -t "$ctx")
        else
            cp "$path" "$ctx/$path"
        fi
    done
    # Wheels: only images that install from the wheelhouse get them (the hash covers their names and sizes).
    if [ "$image" = cpu ]; then
        wheel=$(torch_wheel)
        if [ -n "$wheel" ]; then
            ln "$wheel" "$ctx/wheels/" 2>/dev/null || cp "$wheel" "$ctx/wheels/"
        elif [ -z "${PIP_EXTRA_INDEX_URL:-}${PIP_INDEX_URL:-}${HARNESS_PIP_CONF:-}" ]; then
            die "no torch CPU wheel found in pip's find-links (set HARNESS_WHEELHOUSE, or PIP_EXTRA_INDEX_URL to an index with torch+cpu)"
        fi
    fi
    if [ "$image" = cpu ]; then
        for wheel in docker/context/wheels/*.whl; do
            [ -f "$wheel" ] && { ln "$wheel" "$ctx/wheels/" 2>/dev/null || cp "$wheel" "$ctx/wheels/"; }
        done
    fi
    echo "$ctx"
}

base_for() {
    if [ "$1" = gpu ] && [ -n "${HARNESS_GPU_BASE_IMAGE:-}" ]; then echo "$HARNESS_GPU_BASE_IMAGE"
    elif [ -n "${HARNESS_BASE_IMAGE:-}" ]; then echo "$HARNESS_BASE_IMAGE"
    elif docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then echo "$LOCAL_BASE"
    fi
}

content_hash() {
    local image=$1 ctx=$2 base=$3 base_id=""
    # A local base counts by its layers' content (re-importing the same root file system changes nothing).
    if [ -n "$base" ]; then base_id=$(docker image inspect -f '{{json .RootFS.Layers}}' "$base" 2>/dev/null || true); fi
    {
        echo "image $image"
        echo "base ${base:-default} $base_id"
        (cd "$ctx" && find . -type f ! -path './wheels/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
        (cd "$ctx" && find wheels -type f -printf '%f %s\n' | LC_ALL=C sort)
    } | sha256sum | cut -c1-12
}

# --- a client that builds with BuildKit (RUN --mount is needed for the secrets and the wheelhouse) ----------------
builder() {
    if docker buildx version >/dev/null 2>&1; then echo "docker buildx build --load"; return; fi
    local d
    while read -r d; do
        if DOCKER_BUILDKIT=1 "$d" build --help 2>&1 | grep -q -- '--secret'; then echo "$d build"; return; fi
    done < <(type -ap docker)
    die "no Docker client that builds with BuildKit: install docker-buildx (or use Docker's docker.io client with DOCKER_BUILDKIT=1)"
}

extra_ca() {
    local ca=${HARNESS_EXTRA_CA:-${PIP_CERT:-}}
    if [ -z "$ca" ]; then ca=$(python3 -m pip config get global.cert 2>/dev/null || true); fi
    if [ -n "$ca" ] && [ -s "$ca" ]; then echo "$ca"; fi
}

mkdir -p "$CACHE"
STAGING=$(mktemp -d "$CACHE/context.XXXXXX")
trap 'rm -rf "$STAGING"' EXIT
tags=()
for image in "${images[@]}"; do
    ctx=$(stage "$image")
    cp "docker/Dockerfile.$image" "$ctx/Dockerfile"
    base=$(base_for "$image")
    hash=$(content_hash "$image" "$ctx" "$base")
    tag="harness-$image:$hash"
    tags+=("$tag")
    if [ "$tags_only" = 1 ]; then continue; fi
    if [ -z "${HARNESS_BUILD_NO_CACHE:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
        log "$tag exists, not rebuilt"
        docker tag "$tag" "harness-$image:latest"
        continue
    fi
    args=(--file "$ctx/Dockerfile" --tag "$tag" --tag "harness-$image:latest" --progress=plain
          --label "io.harness.content-hash=$hash")
    [ -n "$base" ] && args+=(--build-arg "BASE_IMAGE=$base")
    [ -n "${HARNESS_BUILD_NO_CACHE:-}" ] && args+=(--no-cache)
    for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
        [ -n "${!var:-}" ] && args+=(--build-arg "$var=${!var}")
    done
    ca=$(extra_ca)
    [ -n "$ca" ] && args+=(--secret "id=extra_ca,src=$ca")
    [ -n "${HARNESS_PIP_CONF:-}" ] && args+=(--secret "id=pip_conf,src=$HARNESS_PIP_CONF")
    build=$(builder)
    buildlog=$CACHE/build-$image.log
    log "building $tag (base ${base:-Dockerfile default}; log: $buildlog)"
    started=$(date +%s)
    # shellcheck disable=SC2086
    if ! DOCKER_BUILDKIT=1 $build "${args[@]}" "$ctx" >"$buildlog" 2>&1; then
        tail -40 "$buildlog" >&2
        die "building $tag failed; full log: $buildlog"
    fi
    size=$(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.2f GB", $1/1e9}')
    log "built $tag in $(( $(date +%s) - started )) s ($size)"
done
if [ "$tags_only" = 0 ]; then
    # BuildKit keeps every intermediate stage (several GB per version of the environments): keep the newest.
    docker builder prune -f --keep-storage "${HARNESS_BUILD_CACHE_KEEP:-20GB}" >/dev/null 2>&1 || true
fi
printf '%s\n' "${tags[@]}"
