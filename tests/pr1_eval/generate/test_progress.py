"""Progress of a run: a bar that moves per decoded chunk on a terminal, log lines off it.

A fake clock drives the timing, so the expected lines are written down by hand."""

from __future__ import annotations

import io
import re
from pathlib import Path

from pr1_eval.generate.progress import RunProgress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_lines_give_done_total_rate_and_eta() -> None:
    clock, out = Clock(), io.StringIO()
    progress = RunProgress(40, stream=out, tty=False, every=3600, clock=clock)  # no heartbeat in this test
    clock.now += 10
    progress.on_engine_call()
    progress.on_generated(8)
    progress.on_stored(8)  # a chunk ended: a line
    clock.now += 1
    progress.on_generated(8)
    progress.on_stored(8)  # 1 s after the last line: folded into the next one
    clock.now += 9
    progress.on_generated(24)
    progress.on_stored(24)  # the last chunk: always a line
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "[pr1-eval] started: 0/40 samples (0%) generated, 0 stored, 0 engine calls; 0.00 samples/s, ETA unknown, "
        "0s elapsed",
        # 8 samples in 10 s: 0.8/s, 32 left: 40 s
        "[pr1-eval] 8/40 samples (20%) generated, 8 stored, 1 engine calls; 0.80 samples/s, ETA 40s, 10s elapsed",
        "[pr1-eval] 40/40 samples (100%) generated, 40 stored, 1 engine calls; 2.00 samples/s, ETA 0s, 20s elapsed",
    ]


def test_a_resumed_run_says_what_it_found_and_counts_what_is_left(tmp_path: Path) -> None:
    """A resume used to read ``started: 0/432`` with no word of the 128 samples kept; the ETA counts
    only the 432 left (the rate is this session's)."""
    from pr1_eval.generate.runner import resume_line

    assert resume_line(tmp_path, {"aime24": 240, "amc23": 320}, {"aime24": 112, "amc23": 320}) == (
        f"resuming {tmp_path}: 128 of 560 samples already done (0 of 2 task(s) finished), 432 left")
    assert resume_line(tmp_path, {"a": 8, "b": 8}, {"a": 0, "b": 4}).endswith("(1 of 2 task(s) finished), 4 left")
    assert resume_line(tmp_path, {"a": 8}, {"a": 8}) is None  # a fresh run says nothing
    clock, out = Clock(), io.StringIO()
    progress = RunProgress(432, stream=out, tty=False, every=3600, clock=clock, earlier=128)
    clock.now += 10
    progress.on_generated(48)
    progress.on_stored(48)
    progress.close()
    lines = out.getvalue().splitlines()
    # "48/432 samples left (128 stored before …)" read as 48 left: the count says what was generated
    assert lines[0].startswith("[pr1-eval] resumed: 0/432 samples (0%) generated this session (128 stored before it)")
    # 48 in 10 s: 4.8/s, 384 left: 80 s
    assert lines[1].startswith("[pr1-eval] 48/432 samples (11%) generated this session (128 stored before it), "
                               "48 stored") and "ETA 1m20s" in lines[1]


def test_the_heartbeat_speaks_while_a_chunk_is_in_flight() -> None:
    out = io.StringIO()
    progress = RunProgress(10, stream=out, tty=False, every=0.05)
    import time

    time.sleep(0.6)  # no sample finishes, yet lines keep coming
    progress.close()
    beats = [line for line in out.getvalue().splitlines() if line.startswith("[pr1-eval] 0/10 samples")]
    assert len(beats) >= 2, out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith("[pr1-eval] stopped: 0/10")  # closed before the end: said so


def test_on_a_terminal_the_bar_moves_when_samples_are_decoded_not_when_stored() -> None:
    out = io.StringIO()
    progress = RunProgress(10, stream=out, tty=True)
    progress.on_generated(3)
    assert re.search(r"3/10 .*stored 0, calls 0", out.getvalue().split("\r")[-1]), out.getvalue()
    progress.on_engine_call()
    progress.on_stored(3)
    assert "stored 3, calls 1" in out.getvalue().split("\r")[-1]
    progress.close()
    assert "[pr1-eval]" not in out.getvalue()  # no log lines beside a bar


def test_durations_read_as_a_person_writes_them() -> None:
    assert [duration(s) for s in (0, 42.4, 185, 7620)] == ["0s", "42s", "3m05s", "2h07m"]


def test_token_steps_show_before_any_chunk_returns_with_a_bounded_eta() -> None:
    """A structured (or HF) chunk of minutes: its token steps show, with a token rate and an ETA
    bounded by the token budget, never '0 engine calls; ETA unknown' for minutes."""
    clock, out = Clock(), io.StringIO()
    progress = RunProgress(4, stream=out, tty=False, every=3600, clock=clock, token_budget=4 * 100)
    clock.now += 10
    for _ in range(25):
        progress.on_decoding_step(4)  # 25 steps of 4 rows: 100 tokens in 10 s, 300 of the 400 left
    progress.line()
    progress.close()
    assert out.getvalue().splitlines()[1] == (
        "[pr1-eval] 0/4 samples (0%) generated, 0 stored, 0 engine calls, 100 tokens in 25 decoding steps "
        "(10.0 tokens/s); 0.00 samples/s, ETA ≤ 30s, 10s elapsed")


def test_the_hf_engine_and_the_structured_decoder_report_each_token_step() -> None:
    from pr1_eval.decoding.structured import StructuredDecoder
    from pr1_eval.engines.base import GenerationRequest, SamplingConfig
    from pr1_eval.engines.hf import HFEngine
    from pr1_eval.testing.tiny_model import cached_tiny_model

    engine = HFEngine(str(cached_tiny_model("random")), device="cpu")
    rows: list[int] = []
    engine.on_decoding_step = rows.append
    prompt = engine.tokenizer("Hello", add_special_tokens=False)["input_ids"]
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=6, seed=0)
    done = engine.generate([GenerationRequest(request_id="r", prompt_token_ids=prompt, n=3)], sampling)
    longest = max(len(c.token_ids) for c in done[0])
    assert len(rows) >= longest and set(rows) == {3}  # one report per step, for the batch's 3 rows
    rows.clear()
    decoded = StructuredDecoder().decode(engine, [prompt], 2, sampling, ["r"])
    assert sum(rows) == sum(len(d.token_ids) for d in decoded[0]) and len(rows) == max(len(d.token_ids) for d in decoded[0])


def test_a_vllm_call_in_flight_shows_its_completions_done_and_its_own_eta() -> None:
    """vLLM decodes a whole chunk in one call: the line names the call, the completions it has
    finished and the call's ETA at the rate so far, and drops it once the call is done."""
    clock, out = Clock(), io.StringIO()
    progress = RunProgress(12, stream=out, tty=False, every=3600, clock=clock)
    clock.now += 5
    progress.on_call_progress(0, 12)  # the call starts 5 s in
    progress.line()
    clock.now += 10
    progress.on_call_progress(4, 12)  # 4 in 10 s: the 8 left take 20 s
    progress.line()
    progress.on_call_progress(12, 12)
    progress.on_engine_call()
    progress.on_generated(12)
    progress.line()
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[1] == ("[pr1-eval] 0/12 samples (0%) generated, 0 stored, 0 engine calls; engine call 1: 0/12 "
                        "completions done, call ETA unknown; 0.00 samples/s, ETA unknown, 5s elapsed")
    assert lines[2] == ("[pr1-eval] 0/12 samples (0%) generated, 0 stored, 0 engine calls; engine call 1: 4/12 "
                        "completions done, call ETA 20s; 0.00 samples/s, ETA unknown, 15s elapsed")
    assert "engine call 2" not in lines[3] and lines[3].startswith("[pr1-eval] 12/12 samples (100%) generated")


def test_the_runner_hands_vllm_the_progress_display_and_takes_it_back() -> None:
    from pr1_eval.generate.runner import LocalChunks

    class Engine:
        name, tokenizer = "vllm", None
        on_call_progress = None

    engine = Engine()
    with RunProgress(1, stream=io.StringIO(), tty=False, every=3600) as progress:
        chunks = LocalChunks(engine, decoder=None)  # type: ignore[arg-type]
        chunks.watch(progress)
        watched = engine.on_call_progress
        chunks.close()
    assert watched == progress.on_call_progress and engine.on_call_progress is None
