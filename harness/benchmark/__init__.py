"""Stage 7, benchmark: the one public face of the harness for a benchmark's code.

A benchmark (``benchmarks/<name>/*.py``) imports everything it uses from here, and from nowhere else in the harness
(``tests/test_import_graph.py`` checks that): ``from harness.benchmark import SingleTurnBenchmark, Task,
register_benchmark``.

``protocol`` (Task, RolloutContext, Episode, the Benchmark base class with its optional hooks, the capabilities a
benchmark declares: TrainsSingleTurn, WritesNativeResults; AgentFailure), ``single_turn`` (SingleTurnBenchmark: a
benchmark from ``prompt`` and an abstract ``score``), ``messages`` (Message with OpenAI's field names, ``complete``
for one chat completion, the records of an episode's messages), ``transcript`` (MessageRecord, ToolCallRecord,
ToolResultRecord: how an episode records its conversation), ``register`` (``register_benchmark`` on the harness's
one Registry, ``load_module`` for a helper file beside the entrypoint). Re-exported here for a benchmark's use: the
spec's types, the data helpers (``fetch_file``, ``read_jsonl``), the tool helpers (the MCP calculator, MCP schemas
as functions, tool-server environments) and the harness's errors and paths.
"""

from harness.assets.data import fetch_file, read_jsonl
from harness.benchmark.messages import Message, Reply, complete, message_record
from harness.benchmark.protocol import (
    AgentFailure,
    Benchmark,
    Episode,
    RolloutContext,
    SimulatorContext,
    Task,
    TrainsSingleTurn,
    WritesNativeResults,
)
from harness.benchmark.register import BENCHMARKS, load_module, register_benchmark
from harness.benchmark.single_turn import SingleTurnBenchmark
from harness.benchmark.transcript import MessageRecord, ToolCallRecord, ToolResultRecord
from harness.errors import HarnessError, SpecError
from harness.paths import cache_dir, env_python
from harness.spec import BenchmarkSpec, DatasetFile
from harness.tools.calculator import calculate, open_calculator
from harness.tools.schema import readable_functions
from harness.tools.servers import no_network_prefix, server_env

__all__ = [
    "BENCHMARKS",
    "AgentFailure",
    "Benchmark",
    "BenchmarkSpec",
    "DatasetFile",
    "Episode",
    "HarnessError",
    "Message",
    "MessageRecord",
    "Reply",
    "RolloutContext",
    "SimulatorContext",
    "SingleTurnBenchmark",
    "SpecError",
    "Task",
    "ToolCallRecord",
    "ToolResultRecord",
    "TrainsSingleTurn",
    "WritesNativeResults",
    "cache_dir",
    "calculate",
    "complete",
    "env_python",
    "fetch_file",
    "load_module",
    "message_record",
    "no_network_prefix",
    "open_calculator",
    "read_jsonl",
    "readable_functions",
    "register_benchmark",
    "server_env",
]
