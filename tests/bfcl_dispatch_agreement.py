"""Run in BFCL's environment by tests/test_bfcl_dispatch.py: the dispatcher (``benchmarks/bfcl/dispatch.py``) against
BFCL's own executor (``execute_multi_turn_func_call``, which ``eval``-s), over every multi-turn task BFCL ships.

For each task, turn by turn on backends that persist across turns, two comparisons:

- the ground truth's calls as BFCL's checker runs them (as written) against the dispatcher's ``as_written`` run;
- the same calls written by a model (the turn's calls as one reply) through BFCL's decoder and executor, against
  ``literal.calls`` and the dispatcher: what a model that replied with the ground truth would get in each.

Both must give the same result texts and the same backend states (BFCL's ``state_checker``), and the model path the
same decoded call texts. Prints one JSON line: counts and the first mismatches.

    python tests/bfcl_dispatch_agreement.py BENCHMARK_FOLDER
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType


def load(folder: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bfcl_child_{name}", folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    folder = Path(sys.argv[1])
    literal, dispatch = load(folder, "literal"), load(folder, "dispatch")
    import bfcl_eval
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import state_checker
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
    from bfcl_eval.model_handler.utils import decoded_output_to_execution_list, default_decode_execute_prompting

    data = Path(bfcl_eval.__file__).parent / "data"
    counts = {"categories": 0, "tasks": 0, "turns": 0, "calls": 0, "error_results": 0}
    mismatches: list[str] = []

    def differ(where: str, ours: object, theirs: object) -> None:
        if ours != theirs and len(mismatches) < 10:
            mismatches.append(f"{where}: dispatcher {str(ours)[:300]} | BFCL {str(theirs)[:300]}")

    for path in sorted(data.glob("BFCL_v4_multi_turn_*.json")):
        counts["categories"] += 1
        answers = {
            row["id"]: row["ground_truth"]
            for row in map(json.loads, (data / "possible_answer" / path.name).read_text().splitlines())
        }
        for entry in map(json.loads, path.read_text().splitlines()):
            counts["tasks"] += 1
            task, category = entry["id"], entry["id"].rsplit("_", 1)[0]
            long_context = dispatch.long_context(category)
            as_written, as_replied = dispatch.Backends(entry), dispatch.Backends(entry)
            for turn, truth in enumerate(answers[task]):
                counts["turns"] += 1
                counts["calls"] += len(truth)
                where = f"{task} turn {turn}"

                def bfcl(calls: list[str], model: str) -> tuple[list[str], dict]:
                    return execute_multi_turn_func_call(
                        calls, entry.get("initial_config", {}), entry["involved_classes"], model, task,
                        long_context=long_context, is_evaL_run=True,
                    )  # fmt: skip

                theirs, their_instances = bfcl(truth, "agreement_truth")
                ours = as_written.run([c for t in truth for c in literal.calls(t, positional=True)], as_written=True)
                differ(f"{where}, ground truth", ours, theirs)
                counts["error_results"] += sum(r.startswith("Error during execution") for r in theirs)
                if not state_checker(as_written.instances, their_instances)["valid"]:
                    differ(f"{where}, ground truth state", "differs", "")
                if not truth:
                    continue
                reply = "[" + ", ".join(truth) + "]"
                decoded = default_decode_execute_prompting(reply)
                theirs, their_instances = bfcl(decoded, "agreement_reply")
                found = literal.calls(reply)
                differ(f"{where}, decoded", decoded_output_to_execution_list([{c.name: c.arguments} for c in found]),
                       decoded)  # fmt: skip
                differ(f"{where}, as a reply", as_replied.run(found), theirs)
                if not state_checker(as_replied.instances, their_instances)["valid"]:
                    differ(f"{where}, as a reply, state", "differs", "")
    print(json.dumps({**counts, "mismatches": mismatches}))


if __name__ == "__main__":
    main()
