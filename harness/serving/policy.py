"""The run's policy model server: started once, reused by every phase that serves the policy.

The baseline's server is started during set-up (it boots while the data and tools are prepared). A later phase
that serves another checkpoint of the same model -- the evaluation after training, or the rollouts of a trace-based
engine's next step -- loads that checkpoint's weights into the running server (:meth:`ModelServer.load`, about a
second) instead of starting a new server (tens of seconds on a CPU), when ``serving.reload_weights`` allows it.

Models whose output layer is tied to the input embeddings (SmolLM2, the small Qwen2.5 models) get a new server
instead: vLLM's layer-wise reload leaves a tied output layer with its old weights (the reloaded server's greedy
answers then differ from a fresh server's; ``tests/test_policy_server.py`` shows both).

An engine that trains without the server (``trl-grpo``, ``verl``) gets the machine to itself: the server is stopped
before it trains, unless ``serving.keep_during_training`` keeps it (a start saved, its memory held meanwhile).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.backends.base import Backend
from harness.errors import ServingError
from harness.results.store.manifest import ServingRecord
from harness.serving.hardware import serving_dtype
from harness.serving.server import ModelServer, launch
from harness.spec import ServingSpec


def reloadable(checkpoint: Path) -> bool:
    """Whether vLLM can load this checkpoint's weights into a running server correctly: only with an output layer
    of its own (see the module's note). Tied models neither store ``lm_head.weight`` nor say ``false``."""
    try:
        config = json.loads((checkpoint / "config.json").read_text())
        if config.get("tie_word_embeddings") or config.get("text_config", {}).get("tie_word_embeddings"):
            return False
        index = checkpoint / "model.safetensors.index.json"
        if index.exists():
            names: list[str] = list(json.loads(index.read_text())["weight_map"])
        else:
            from safetensors import safe_open

            names = []
            for f in checkpoint.glob("*.safetensors"):
                with safe_open(f, "pt") as st:
                    names += list(st.keys())
    except (OSError, ValueError, KeyError, AttributeError):
        return False
    return any(name.endswith("lm_head.weight") for name in names)


class PolicyServer:
    """At most one policy server at a time; :meth:`close` stops it."""

    def __init__(self, name: str, serving: ServingSpec, backend: Backend | None, labels: dict[str, str]) -> None:
        self.name = name
        self.serving = serving
        self.backend = backend
        self.labels = labels
        self.server: ModelServer | None = None
        self.checkpoint: Path | None = None
        self.starts = 0
        self.loads: list[float] = []
        """Seconds each in-place weight load took."""
        self.load_failures: list[str] = []
        """Loads the server refused (e.g. a vLLM without the reload endpoint); a new server was started instead."""
        self._stopping: list[threading.Thread] = []
        """Servers being stopped in the background (:meth:`stop` with ``wait=False``); :meth:`close` waits for them."""

    def launch(self, checkpoint: Path, log_path: Path) -> ModelServer:
        """Start serving ``checkpoint`` now (without waiting for it), replacing any running server."""
        self.stop()
        self.server = launch(
            checkpoint,
            self.name,
            self.serving,
            log_path,
            backend=self.backend,
            labels=self.labels,
        )
        self.checkpoint, self.starts = checkpoint, self.starts + 1
        return self.server

    def _running(self) -> ModelServer | None:
        if self.server is not None and not self.server.alive():
            self.server = None  # died; the next use starts another (and reports if that fails too)
        return self.server

    @contextlib.contextmanager
    def use(
        self, checkpoint: Path, log_path: Path, wait: bool = True, tick: Callable[[float], None] | None = None
    ) -> Iterator[ModelServer]:
        """A server answering for ``checkpoint``: the running one (its weights swapped if needed) or a new one.

        ``wait=False`` may hand over a server that is still starting (the caller awaits
        :meth:`ModelServer.wait_ready_async`). The server keeps running after the block; :meth:`close` stops it.
        """
        server = self._running()
        if server is not None and self.checkpoint != checkpoint:
            server = self._load(server, checkpoint, tick)
        if server is None:
            server = self.launch(checkpoint, log_path)
        if wait:
            server.wait_ready(self.serving.startup_timeout_s, tick)
        yield server

    def prepare(self, checkpoint: Path, log_path: Path) -> None:
        """Start the server that the next :meth:`use` of ``checkpoint`` would start, now, without waiting: it boots
        while the caller goes on (e.g. hashes the checkpoint a trainer just wrote). Nothing to do when the running
        server already serves it or can load its weights in place."""
        server = self._running()
        if server is not None and (self.checkpoint == checkpoint or self._can_load(checkpoint)):
            return
        self.launch(checkpoint, log_path)

    def _can_load(self, checkpoint: Path) -> bool:
        return self.serving.reload_weights and reloadable(checkpoint)

    def _load(self, server: ModelServer, checkpoint: Path, tick: Callable[[float], None] | None) -> ModelServer | None:
        """Load ``checkpoint`` into the running ``server``; None when it cannot (then a new server is started)."""
        if not self._can_load(checkpoint):
            return None
        server.wait_ready(self.serving.startup_timeout_s, tick)
        try:
            self.loads.append(server.load(checkpoint))
        except ServingError as exc:
            self.load_failures.append(str(exc))
            return None
        self.checkpoint = checkpoint
        return server

    def before_training(self, engine_uses_server: bool, wait: bool = True) -> None:
        """Free the machine for an engine that trains without the server, unless the spec keeps it. ``wait=False``:
        the server shuts down (a second or two on a CPU) while the trainer starts."""
        if not engine_uses_server and not self.serving.keep_during_training:
            self.stop(wait=wait)

    def stop(self, wait: bool = True) -> None:
        """Stop the running server; with ``wait=False`` in the background (:meth:`close` waits for it)."""
        server, self.server, self.checkpoint = self.server, None, None
        if server is None:
            return
        if wait:
            server.stop()
            return
        stopping = threading.Thread(target=server.stop, name="stop-model-server", daemon=True)
        stopping.start()
        self._stopping.append(stopping)

    def close(self) -> None:
        """Stop the running server and wait for every server being stopped."""
        self.stop()
        for stopping in self._stopping:
            stopping.join()
        self._stopping.clear()

    def describe(self) -> ServingRecord:
        """For the manifest: the dtype served, how many servers were started and how the weights were swapped."""
        return ServingRecord(
            dtype=serving_dtype(self.serving.dtype),
            starts=self.starts,
            weight_loads=len(self.loads),
            weight_load_s=[round(s, 2) for s in self.loads],
            weight_load_failures=list(self.load_failures),
            reload_weights=self.serving.reload_weights,
            keep_during_training=self.serving.keep_during_training,
        )
