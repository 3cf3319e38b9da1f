"""The Dockerfiles and scripts, read as files: pinned bases, hash-checked installs, no secrets, non-root users.

Nothing here needs an engine. The GPU image is built and tested inside by tests/docker/test_gpu_image.py (minutes
when its content tag exists, a long download when not); these checks run everywhere.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from support_docker import (
    BUILD_SCRIPT,
    DOCKER_DIR,
    IMAGES,
    ROOT,
    dockerfile,
    lock_versions,
    parse_dockerfile,
)

pytestmark = pytest.mark.docker

DIGEST = re.compile(r"^[a-z0-9./:_-]+@sha256:[0-9a-f]{64}$")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def secret_name(name: str) -> bool:
    """API_KEY, HF_TOKEN, DB_PASSWORD, ... but not TOKENIZERS_PARALLELISM (whole name parts only)."""
    return any(part.endswith(SECRET_WORDS) for part in re.split(r"[_.\-]", name.upper()))


EXPECTED_BASE = {
    "calculator": "python:3.11-slim-bookworm@sha256:",
    "cpu": "python:3.11-slim-bookworm@sha256:",
    "gpu": "python:3.11-slim-bookworm@sha256:",
}
# The lock each environment of each image is installed from (labels io.harness.env.<env>.<package>=<version>).
LOCKS = {
    "calculator": {"calculator": "locks/calculator.txt"},
    "cpu": {"serve-cpu": "locks/serve-cpu.txt", "harness": "locks/harness.txt", "calculator": "locks/calculator.txt"},
    "gpu": {"harness": "docker/requirements/gpu.lock", "calculator": "docker/requirements/gpu-calculator.lock"},
}


def pip_installs(image: str) -> list[str]:
    """Every `pip install ...` command of the Dockerfile's RUN steps (split at && and ;)."""
    out = []
    for run in dockerfile(image).all("RUN"):
        for part in re.split(r"&&|;|\|\|", run.args):
            if re.search(r"\bpip3?\s+install\b", part):
                out.append(" ".join(part.split()))
    return out


@pytest.mark.parametrize("image", IMAGES)
def test_dockerfile_parses(image: str) -> None:
    df = dockerfile(image)
    assert df.stages[-1].name is None or df.stages[-1].instructions, "the final stage is empty"
    if shutil.which("docker"):  # `docker build --check` (buildx >= 0.15) lints without building, where supported
        check = subprocess.run(
            ["docker", "build", "--check", "-f", str(df.path), str(ROOT)], capture_output=True, text=True, timeout=120
        )
        unsupported = ("unknown flag", "buildx component", "requires", "not supported", "unknown shorthand")
        if check.returncode != 0 and not any(s in check.stderr for s in unsupported):
            pytest.fail(f"docker build --check {df.path.name}:\n{check.stdout}\n{check.stderr}")


@pytest.mark.parametrize("image", IMAGES)
def test_every_base_is_the_pinned_build_arg_or_a_stage(image: str) -> None:
    df = dockerfile(image)
    default = df.global_args.get("BASE_IMAGE")
    assert default, "ARG BASE_IMAGE=<image>@sha256:<digest> must come before the first FROM"
    assert DIGEST.match(default), f"BASE_IMAGE default is not pinned by digest: {default}"
    assert default.startswith(EXPECTED_BASE[image]), default
    names: set[str] = set()
    for stage in df.stages:
        assert stage.base in ("${BASE_IMAGE}", "$BASE_IMAGE") or stage.base in names, (
            f"FROM {stage.base}: must be ${{BASE_IMAGE}} or an earlier stage"
        )
        if stage.name:
            names.add(stage.name)


@pytest.mark.parametrize("image", IMAGES)
def test_final_stage_runs_as_non_root(image: str) -> None:
    final = dockerfile(image).stages[-1]
    users = [i.args.split(":")[0].strip() for i in final.instructions if i.keyword == "USER"]
    assert users, "the final stage sets no USER"
    assert users[-1] not in ("0", "root"), f"final USER is {users[-1]}"
    assert any("useradd" in i.args for i in final.instructions if i.keyword == "RUN") or image == "calculator"


@pytest.mark.parametrize("image", IMAGES)
def test_no_secrets_baked_in(image: str) -> None:
    df = dockerfile(image)
    for ins in df.all("ENV") + df.all("ARG") + df.all("LABEL"):
        keys = re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_.-]*)=", " " + ins.args) or [ins.args.split()[0]]
        for key in keys:
            assert not secret_name(key), f"line {ins.line}: {ins.keyword} {key}"
    for name in df.global_args:
        assert not secret_name(name), f"global ARG {name}"
    for ins in df.all("COPY") + df.all("ADD"):
        assert not re.search(r"\.(pem|crt|key)\b|pip\.conf|netrc|/run/secrets", ins.args), f"line {ins.line}"
    # Secrets reach a RUN step only as BuildKit secret mounts, and only the build helper reads them.
    for ins in df.all("RUN"):
        if "/run/secrets" in ins.args or "extra_ca" in ins.args:
            assert "--mount=type=secret,id=extra_ca" in ins.args, f"line {ins.line}"
    text = df.path.read_text()
    assert not re.search(r"(sk-[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{16,}|BEGIN CERTIFICATE)", text)


def test_build_helper_keeps_the_ca_out_of_layers() -> None:
    helper = (DOCKER_DIR / "context" / "build-env.sh").read_text()
    assert "/run/secrets/extra_ca" in helper and "mktemp" in helper and 'rm -f "$tmp"' in helper
    assert "/etc/ssl/certs/ca-certificates.crt" in helper  # added to the image's own bundle, for pip only


def test_gpu_installs_are_hash_locked() -> None:
    """Every third-party package of the GPU image comes from a lock, --no-deps --require-hashes (as on the H200)."""
    installs = pip_installs("gpu")
    assert installs
    locked = [c for c in installs if "--require-hashes" in c]
    for lock in ("gpu.lock", "gpu-calculator.lock", "gpu-convert.lock"):
        assert any(f"-r /opt/harness/locks/{lock}" in c for c in locked), (lock, installs)
    for cmd in installs:
        assert "--no-deps" in cmd, f"without --no-deps pip would resolve beyond the lock: {cmd}"
        if "--require-hashes" in cmd:
            assert re.search(r"-r /opt/harness/locks/gpu(-calculator|-convert)?\.lock\b", cmd), cmd
        else:  # only the harness itself, from its source, without dependencies
            assert cmd.rstrip().endswith("/tmp/src"), f"unhashed install: {cmd}"
    copies = " ".join(i.args for i in dockerfile("gpu").all("COPY"))
    for lock in ("gpu.lock", "gpu-calculator.lock", "gpu-convert.lock"):
        assert f"docker/requirements/{lock}" in copies
    env = " ".join(i.args for i in dockerfile("gpu").all("ENV"))
    for setting in (
        "NCCL_NVLS_ENABLE=0",
        "HARNESS_ENV_CALCULATOR=",
        "HARNESS_CONVERT_PATH=",
        "HARNESS_PACKAGE_LOCK=/opt/harness/locks/gpu.lock",
    ):
        assert setting in env
    assert "LITELLM" not in env, "agent-lightning (and its litellm) is not in the image"


def test_gpu_image_and_h200_install_use_the_same_locks() -> None:
    """scripts/gpu-wheels.sh packs, and scripts/gpu-install.sh installs, the locks the Dockerfile installs."""
    wheels = (ROOT / "scripts" / "gpu-wheels.sh").read_text()
    install = (ROOT / "scripts" / "gpu-install.sh").read_text()
    for lock in ("gpu.lock", "gpu-calculator.lock", "gpu-convert.lock"):
        assert f"docker/requirements/{lock}" in wheels or f"/{lock}" in wheels, lock
    assert "--require-hashes" in wheels and "--require-hashes" in install
    assert 'download "$lock" ' in wheels, "the H200 install must come from gpu.lock, not from the bare pins"
    assert "h200=$req/gpu-h200.txt" in wheels  # read only to tell the machine's own torch stack from the H200 set


@pytest.mark.parametrize("image", ["cpu", "calculator"])
def test_cpu_images_install_only_pinned_locks(image: str) -> None:
    installs = pip_installs(image)
    assert installs
    for cmd in installs:
        assert "--no-deps" in cmd, f"without --no-deps pip may resolve (and pull CUDA torch): {cmd}"
        assert re.search(r"-r /tmp/locks/\S+|/tmp/src$", cmd), cmd
        assert not re.search(r"\btorch\b(?!==)", cmd.replace("/tmp/locks/", "")), f"unpinned torch: {cmd}"
    if image == "cpu":
        for lock in ("locks/serve-cpu.txt", "locks/harness.txt"):
            assert lock_versions(ROOT / lock)["torch"].endswith("+cpu"), f"{lock} must pin the CPU torch"
        assert sum("--find-links /wheels" in c for c in installs) == 2


@pytest.mark.parametrize("image", IMAGES)
def test_package_labels_match_the_locks(image: str) -> None:
    labels = " ".join(i.args for i in dockerfile(image).stages[-1].instructions if i.keyword == "LABEL")
    for key in ("title", "version", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels
    pinned = re.findall(r'io\.harness\.env\.([a-z0-9-]+)\.([a-z0-9-]+)="([^"]+)"', labels)
    assert pinned
    for env, name, version in pinned:
        assert env in LOCKS[image], f"label for unknown environment {env}"
        locked = lock_versions(ROOT / LOCKS[image][env]).get(name)
        assert locked == version, f"label io.harness.env.{env}.{name}={version}, {LOCKS[image][env]} has {locked}"


@pytest.mark.parametrize("image", IMAGES)
def test_build_script_hashes_every_copied_file(image: str) -> None:
    """What a Dockerfile copies from the context must be among the inputs the content tag is computed from."""
    script = BUILD_SCRIPT.read_text()
    body = re.search(rf"\n\s*{image}\) echo (.*?);;", script, re.S)
    assert body, f"no inputs for {image} in build-images.sh"
    inputs = set(body.group(1).replace("\\", " ").split())
    assert f"docker/Dockerfile.{image}" in inputs
    for ins in dockerfile(image).all("COPY"):
        if "--from=" in ins.args:
            continue
        sources = [a for a in ins.args.split() if not a.startswith("--")][:-1]
        for src in sources:
            assert src in inputs, f"COPY {src} is not hashed by build-images.sh"
    for ins in dockerfile(image).all("RUN"):
        for src in re.findall(r"--mount=type=bind,source=([^,\s]+)", ins.args):
            # the staged wheelhouse (its file names are hashed), or hashed sources
            assert src == "wheels" or src in inputs, f"RUN --mount source {src} is not hashed by build-images.sh"


def test_content_tags_are_the_same_when_asked_for_at_once() -> None:
    """Several processes ask for this checkout's tags at the same time (the two pytest processes of `make test`, a run
    choosing its backend): each stages its own context, so all get the same tags and none fails."""
    cmd = ["bash", str(BUILD_SCRIPT), "--tags-only", "cpu", "calculator"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert all(rc == 0 for rc, _, _ in results), [err[-500:] for _, _, err in results]
    tags = {out for _, out, _ in results}
    assert len(tags) == 1 and len(tags.pop().split()) == 2, results


def test_scripts_are_valid_bash() -> None:
    for script in ("docker-setup.sh", "build-images.sh"):
        path = ROOT / "scripts" / script
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, script
        assert path.stat().st_mode & 0o111, f"{script} is not executable"
        text = path.read_text()
        # Mirrors and indexes come from the machine's apt and pip configuration, never from the scripts.
        assert not re.search(r"https?://", text), f"{script} names a URL"


def test_parser_rejects_broken_dockerfiles(tmp_path) -> None:
    bad = tmp_path / "Dockerfile"
    for text in ("RUN echo hi\nFROM x\n", "FROM a b\n", "FROM x\nFOO bar\n", "FROM x\nRUN a \\\n"):
        bad.write_text(text)
        with pytest.raises(ValueError):
            parse_dockerfile(bad)
