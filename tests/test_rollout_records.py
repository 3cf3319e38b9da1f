"""The rollouts JSONL: an :class:`Episode` per line, typed and versioned, read back as it was written.

Lines written before records carried ``schema_version`` read as version 1 and come back equal; a newer version, or a
JSON line that is not a record, is a one-line error naming the file and the line; a line a crash cut off is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.benchmark import Episode, Message, MessageRecord, ToolCallRecord, ToolResultRecord
from harness.errors import HarnessError
from harness.rollout.records import read_records, to_line

OLD_LINE = (
    '{"task_id": "t7", "sample": 1, "reward": 1.0, "passed": true, "answer": "5", "messages": ['
    '{"role": "user", "text": "What is 2 + 3?"}, '
    '{"role": "assistant", "text": "", "tool_calls": [{"name": "calculate", "arguments": {"expression": "2 + 3"}, '
    '"call_id": "c1"}]}, '
    '{"role": "tool", "text": "", "tool_results": [{"call_id": "c1", "result": "5"}]}, '
    '{"role": "assistant", "text": "### 5"}], '
    '"tool_calls": 1, "turns": 2, "prompt_tokens": 30, "completion_tokens": 12, "latency_s": 0.25, '
    '"error_kind": "", "error": "", "attempts": 1, "info": {"category": "simple"}}'
)
"""A line as the harness wrote it before lines carried their version."""


def _episode() -> Episode:
    """A scored episode with a call and its result, an assistant's API tool call and BFCL's text-only results."""
    api_call = {"id": "x", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    return Episode(
        task_id="t1",
        sample=2,
        reward=1.0,
        passed=True,
        answer="5",
        messages=[
            Message(role="user", content="What is 2 + 3? é").record(),
            MessageRecord(
                role="assistant",
                text="",
                tool_calls=[ToolCallRecord(name="calculate", arguments={"expression": "2 + 3"}, call_id="c1")],
            ),
            MessageRecord(role="tool", text="", tool_results=[ToolResultRecord(call_id="c1", result="5")]),
            Message(role="assistant", content=None, tool_calls=[api_call]).record(),
            Message(role="user", content="results").record(tool_results=["ok", "Error during execution: x"]),
            Message(role="assistant", content="### 5").record(),
        ],
        tool_calls=2,
        turns=3,
        prompt_tokens=30,
        completion_tokens=12,
        latency_s=0.25,
        info={"category": "simple", "nested": [1, {"k": None}]},
    )


def _write(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_an_episode_with_tool_calls_and_results_reads_back_equal(tmp_path: Path) -> None:
    episode = _episode()
    failed = Episode(task_id="t2", error_kind="infra", error="ConnectError: down", attempts=3)
    got = read_records(_write(tmp_path / "r.jsonl", to_line(episode), to_line(failed)))
    assert got == {("t1", 2): episode, ("t2", 0): failed}
    assert got["t1", 2].messages[4].tool_results == ["ok", "Error during execution: x"]
    assert json.loads(to_line(episode))["schema_version"] == 1


def test_an_unversioned_line_reads_as_version_one_and_back_the_same(tmp_path: Path) -> None:
    ((key, episode),) = read_records(_write(tmp_path / "r.jsonl", OLD_LINE)).items()
    assert key == ("t7", 1) and episode.final_text == "### 5"
    assert episode.messages[1].tool_calls == [
        ToolCallRecord(name="calculate", arguments={"expression": "2 + 3"}, call_id="c1")
    ]
    assert episode.messages[2].tool_results == [ToolResultRecord(call_id="c1", result="5")]
    # written again, the line is the old one with its version in front
    assert to_line(episode) == '{"schema_version": 1, ' + OLD_LINE[1:]


def test_a_message_without_tool_calls_has_no_such_keys() -> None:
    written = json.loads(to_line(_episode()))["messages"]
    assert written[0] == {"role": "user", "text": "What is 2 + 3? é"}
    assert written[3] == {"role": "assistant", "text": "", "tool_calls": [{"name": "f", "arguments": '{"a": 1}'}]}
    assert written[4] == {"role": "user", "text": "results", "tool_results": ["ok", "Error during execution: x"]}


def test_a_lone_surrogate_is_written_escaped_and_reads_back(tmp_path: Path) -> None:
    episode = Episode(task_id="t", messages=[MessageRecord(role="assistant", text="a\ud800b")])
    line = to_line(episode)
    assert line.isascii() and "\\ud800" in line
    assert read_records(_write(tmp_path / "r.jsonl", line)) == {("t", 0): episode}


def test_a_newer_version_is_refused_in_one_line(tmp_path: Path) -> None:
    newer = json.dumps({**json.loads(to_line(_episode())), "schema_version": 2})
    path = _write(tmp_path / "r.jsonl", OLD_LINE, newer)
    with pytest.raises(HarnessError) as err:
        read_records(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: rollout record: written by a newer harness (schema_version 2;")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"sample": 0}, "task_id: missing required key"),
        ({"task_id": "t", "surprise": 1}, "surprise: unknown key"),
        ({"task_id": "t", "reward": "high"}, "reward: Input should be a valid number"),
        ({"task_id": "t", "messages": [{"role": "user"}]}, "messages.0.text: missing required key"),
        ({"task_id": "t", "messages": [{"role": "user", "text": "", "tool_calls": [{}]}]}, "messages.0.tool_calls.0"),
        ([1, 2], "rollout record must be a JSON object"),
    ],
)
def test_a_json_line_that_is_not_a_record_is_a_one_line_error(tmp_path: Path, record: object, says: str) -> None:
    path = _write(tmp_path / "r.jsonl", OLD_LINE, OLD_LINE, json.dumps(record))
    with pytest.raises(HarnessError) as err:
        read_records(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3: ") and says in message and "\n" not in message, message


def test_lines_a_crash_cut_are_skipped(tmp_path: Path) -> None:
    """A line cut off (mid-character too), and a later append that carried on after it, are not records."""
    path = tmp_path / "r.jsonl"
    done = to_line(_episode())
    cut = to_line(Episode(task_id="t3", messages=[MessageRecord(role="user", text="é")])).encode()
    cut = cut[: cut.index("é".encode()) + 1]  # the first byte of a two-byte character
    path.write_bytes(done.encode() + b"\n" + cut + OLD_LINE.encode() + b"\n" + b'{"task_id": "t4", "sam')
    assert sorted(read_records(path)) == [("t1", 2)]
