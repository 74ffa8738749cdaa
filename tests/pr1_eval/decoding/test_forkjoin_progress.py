"""A fork-join chunk whose engine calls take long says, while they run, what it is waiting on.

A newcomer's resumed fork-join run on CPU printed ``0/352 samples … 1 engine calls … ETA ≤ 7h36m``
for 9 minutes with nothing else: one chunk of 128 samples waited on its longest paths. Now the
decoder tells the progress display, before each wave, what the wave runs (main line, paths or
summaries, for how many samples, in which block, how far the chunk has come), and the heartbeat
lines show it while the call is in flight. Here a scripted engine's calls each take 0.3 s and the
heartbeat speaks every 0.05 s, so lines are written *during* calls; what they must say is derived
from the script by hand (3 problems × k = 4 = 12 samples, 2 blocks of 2 paths: waves main, paths,
summary, main, paths, summary, main).
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from typing import Any

from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import SamplingConfig
from pr1_eval.generate.progress import RunProgress
from pr1_eval.generate.runner import LocalChunks
from tests.support.parallel_fakes import FakeEngine, Script

PROMPTS = [[50, 51, 52], [60, 61], [70]]
IDS = ["t/a", "t/b", "t/c"]


class SlowEngine(FakeEngine):
    """The scripted engine, each call lasting ``CALL_S`` (a CPU engine decoding a wave's longest path)."""

    CALL_S = 0.3

    def generate(self, requests: Sequence[Any], sampling: SamplingConfig) -> Any:
        time.sleep(self.CALL_S)
        return super().generate(requests, sampling)


def test_the_line_says_which_wave_runs_while_a_long_call_is_in_flight() -> None:
    out = io.StringIO()
    progress = RunProgress(12, stream=out, tty=False, every=0.05)
    engine, decoder = SlowEngine(Script(blocks=2)), ForkJoinDecoder()
    chunks = LocalChunks(engine, decoder)
    chunks.watch(progress)  # the runner's wiring: the decoder reports to the progress display
    assert decoder.on_activity == progress.set_activity
    decoder.decode(chunks._watched, PROMPTS, 4, SamplingConfig(max_new_tokens=400, seed=3), IDS)
    progress.close()
    chunks.close()
    assert decoder.on_activity is None  # a sweep's next run is not reported to this one
    lines = out.getvalue().splitlines()
    waves = {}
    for line in lines:
        if "fork-join wave " in line:
            number = int(line.split("fork-join wave ")[1].split(":")[0])
            waves.setdefault(number, line)
    assert sorted(waves) == list(range(1, 8)), lines  # every one of the 7 waves was seen during its call
    assert "main line for 12 of 12 sample(s), after 0 block(s); 0/12 samples finished, 0 tokens so far" in waves[1]
    assert "2 paths each for 12 of 12 sample(s), block 1 of at most 4" in waves[2]
    assert "summaries for 12 of 12 sample(s), block 1 of at most 4" in waves[3]
    assert "2 paths each for 12 of 12 sample(s), block 2 of at most 4" in waves[5]
    assert "main line for 12 of 12 sample(s), after 2 block(s)" in waves[7]
    # the calls counted while waves run: wave n's line was written after n - 1 calls had returned
    for number, line in waves.items():
        assert f"{number - 1} engine calls" in line, line
    # tokens so far grow from wave to wave (each sample's main line, 2 paths and a summary add to it)
    so_far = [int(waves[n].split(" tokens so far")[0].rsplit(" ", 1)[1]) for n in sorted(waves)]
    assert so_far == sorted(so_far) and so_far[0] == 0 and so_far[-1] > 0
