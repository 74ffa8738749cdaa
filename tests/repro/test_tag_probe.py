"""The teacher-forced tag probe (repro.tag_probe) and the CPU SFT's schedule and epoch overrides (repro.cpu_sft).

The probe's figures are checked against a second computation: one forward over prefix + tag, whose
logits at the prefix's last position must give the same log-probability, and a rank counted by sorting.
"""

from __future__ import annotations

import pytest

from pr1_eval.errors import Pr1EvalError
from repro.cpu_sft import CpuSftPlan, epochs_for, overrides
from repro.tag_probe import TAG, block_start_prefixes, probe, probe_table

ROWS = [
    [{"role": "user", "content": "Natalia sold 48 clips."}, {"role": "assistant", "content": "Let x be 4. <Parallel><Path>a</Path></Parallel>"}],
    [{"role": "user", "content": "How many cats?"}, {"role": "assistant", "content": "No block here. Final Answer: 3"}],
    [{"role": "user", "content": "2x + 3 = 11"}, {"role": "assistant", "content": "<Parallel><Path>x = 4</Path></Parallel>"}],
]


def test_the_probe_reads_the_tag_where_the_row_opens_its_block() -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.testing import tiny_model_dir

    model_dir = str(tiny_model_dir())
    result = probe(model_dir, ROWS)
    assert result.rows_without_tag == 1 and len(result.logprobs) == len(result.ranks) == 2

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tag_id = tokenizer.get_vocab()[TAG]
    for i, row in enumerate([ROWS[0], ROWS[2]]):
        prompt = tokenizer.apply_chat_template(row[:-1], tokenize=False, add_generation_prompt=True)
        text = prompt + row[-1]["content"]
        whole = tokenizer(text[: text.index(TAG) + len(TAG)], add_special_tokens=False)["input_ids"]
        assert whole[-1] == tag_id  # the tag is one token, right after the prefix
        with torch.no_grad():
            logits = model(torch.tensor([whole])).logits[0, -2].float()  # predicts the tag
        expected = float(torch.log_softmax(logits, -1)[tag_id])
        assert result.logprobs[i] == pytest.approx(expected, abs=1e-3)
        order = torch.argsort(logits, descending=True).tolist()
        assert result.ranks[i] == order.index(tag_id) + 1 or logits[order[result.ranks[i] - 1]] == logits[tag_id]
    assert f"{len(result.ranks)} rows probed; 1 without {TAG} left out" in probe_table([result])


def test_rows_without_the_tag_are_counted_and_none_at_all_is_an_error() -> None:
    pytest.importorskip("torch")
    from transformers import AutoTokenizer

    from repro.testing import tiny_model_dir

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    prefixes, without = block_start_prefixes(tokenizer, ROWS)
    assert without == 1 and len(prefixes) == 2
    assert tokenizer.decode(prefixes[0]).endswith("Let x be 4. ")
    with pytest.raises(Pr1EvalError, match="none of the 1 rows has <Parallel>"):
        probe(str(tiny_model_dir()), [ROWS[1]])


def test_steps_beyond_one_epoch_ask_verl_for_enough_epochs_and_the_schedule_is_passed() -> None:
    assert [epochs_for(s, 80, 4) for s in (5, 20, 21, 40, 41)] == [1, 1, 2, 2, 3]  # 20 steps per epoch
    texts = overrides(CpuSftPlan(rows=80, max_length=640, steps=40, lr=5e-4, schedule="constant"), 40, 80)
    assert "trainer.total_epochs=2" in texts and "trainer.total_training_steps=40" in texts
    assert "optim.lr_scheduler_type=constant" in texts and "optim.lr=0.0005" in texts
    assert "optim.lr_scheduler_type=cosine" in overrides(CpuSftPlan(), 24, 96)
    with pytest.raises(Pr1EvalError, match="--schedule linear"):
        overrides(CpuSftPlan(schedule="linear"), 24, 96)
