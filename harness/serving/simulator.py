"""The services a run holds for its whole length, apart from the policy server (:mod:`harness.serving.policy`):
the user simulator of benchmarks with a simulated user, and the commands of the tool servers the agents start.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console

from harness.assets.models import checkpoint_hash, prepare_model
from harness.backends import Backend
from harness.results.store.manifest import SimulatorRecord
from harness.serving.server import serve
from harness.spec import BenchmarkSpec
from harness.ui import progress

SIMULATOR_URL_ENV = "HARNESS_USER_SIMULATOR_URL"
SIMULATOR_MODEL_ENV = "HARNESS_USER_SIMULATOR_MODEL"
SIMULATOR_KEY_ENV = "HARNESS_USER_SIMULATOR_API_KEY"


@dataclass(frozen=True)
class SimulatorEndpoint:
    """Where the rollouts reach the user simulator."""

    base_url: str
    model: str
    api_key: str = field(default="EMPTY", repr=False)
    """Never written anywhere (not in the manifest, a log or a worker's job file)."""


def serves_simulator(spec: BenchmarkSpec) -> bool:
    """Whether a run of ``spec`` serves its user simulator on this machine (rather than none, or an external
    endpoint named by ``HARNESS_USER_SIMULATOR_URL``)."""
    return spec.user_simulator is not None and not os.environ.get(SIMULATOR_URL_ENV)


def start_user_simulator(
    spec: BenchmarkSpec,
    run_dir: Path,
    stack: contextlib.ExitStack,
    backend: Backend,
    labels: dict[str, str],
    console: Console,
) -> tuple[SimulatorEndpoint | None, SimulatorRecord | None]:
    """The user simulator for the whole run, and what the manifest records of it (model, hash or endpoint host;
    never a key). Served here (stopped when ``stack`` closes) unless ``HARNESS_USER_SIMULATOR_URL`` names an
    external endpoint. (None, None) for a benchmark without one."""
    sim = spec.user_simulator
    if sim is None:
        return None, None
    url = os.environ.get(SIMULATOR_URL_ENV)
    if url:
        model = os.environ.get(SIMULATOR_MODEL_ENV) or sim.model.name
        record = SimulatorRecord(source="endpoint", model=model, host=urlsplit(url).hostname or "")
        console.print(f"  user simulator: {model} at external endpoint {record.host}")
        return SimulatorEndpoint(url, model, os.environ.get(SIMULATOR_KEY_ENV, "EMPTY")), record
    with console.status("preparing the user-simulator model"):
        checkpoint = prepare_model(sim.model)
        digest = checkpoint_hash(checkpoint)
    with progress(console) as bars:
        bar = bars.add_task("user simulator: starting model server", total=None)
        server = stack.enter_context(
            serve(
                checkpoint,
                f"user-simulator-{sim.model.name}",
                spec.serving,
                run_dir / "server-user-simulator.log",
                tick=lambda s: bars.update(bar, description=f"user simulator: starting ({s:.0f} s)"),
                backend=backend,
                labels={**labels, "harness.role": "user-simulator"},
            )
        )
    console.print(f"  user simulator: {sim.model.name} {digest[:12]} served for the run (never trained)")
    endpoint = SimulatorEndpoint(server.endpoint.base_url, server.endpoint.model)
    return endpoint, SimulatorRecord(source="served", model=sim.model.name, hash=digest)
