"""Answers stop at the chat template's end of turn as well as at EOS, on a tokenizer built here whose EOS
(`<|endoftext|>`, id 0) is not its template's turn end (`<|im_end|>`, id 2), as with Qwen2.5's base tokenizer:
the rule that finds the turn end, vLLM's SamplingParams as the score job builds them, and the verl rollout's generation
config as verl's own Hydra config composes the override and verl's own loader reads the folder."""
import os
import sys
import types

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config

from dataflex_rl.backends.verl.overrides import GENERATION_CONFIG_KEY, RunFiles, run_overrides
from dataflex_rl.backends.verl.rollout_stops import rollout_eos_ids, write_rollout_generation_config
from dataflex_rl.backends.verl.scoring import VllmGenerator
from dataflex_rl.backends.verl.vllm_requests import request_seed
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.corpus.turn_end import stop_token_ids, turn_end_token_id

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>"]  # ids 0, 1, 2, 3
QWEN = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|eot_id|>{% endfor %}"
PLAIN = "{% for m in messages %}### {{ m['role'] }}\n{{ m['content'] }}\n\n{% endfor %}"  # no special token


def base_tokenizer(template: str | None = QWEN) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["user assistant question answer 12 + 3 = 15"], trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL[1:])
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module")
def base_model_dir(tmp_path_factory):
    """A model folder as a base checkpoint ships it: config.json (EOS 0, no generation_config.json) and the tokenizer."""
    folder = tmp_path_factory.mktemp("base")
    Qwen2Config(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, eos_token_id=0, bos_token_id=0).save_pretrained(folder)
    base_tokenizer().save_pretrained(folder)
    return folder


@pytest.mark.parametrize("template, turn_end, stops", [(QWEN, 2, [0, 2]), (LLAMA, 3, [0, 3]), (PLAIN, None, [0]),
                                                       (None, None, [0])])
def test_the_turn_end_is_the_special_token_that_closes_the_assistants_turn(template, turn_end, stops):
    tokenizer = base_tokenizer(template)
    assert tokenizer.eos_token_id == 0 and tokenizer.convert_tokens_to_ids("<|im_end|>") == 2
    assert turn_end_token_id(tokenizer) == turn_end
    assert stop_token_ids(tokenizer) == stops


def test_an_instruct_tokenizer_whose_eos_is_the_turn_end_stops_once():
    tokenizer = base_tokenizer()
    tokenizer.eos_token = "<|im_end|>"
    assert stop_token_ids(tokenizer) == [2]


def test_a_template_that_drops_the_assistants_message_is_refused():
    with pytest.raises(ValueError, match="chat template dropped the assistant's message"):
        turn_end_token_id(base_tokenizer("{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}"
                                         "{% endif %}{% endfor %}"))


class _RecordingVllm(types.ModuleType):
    """vllm's LLM and SamplingParams as the score job calls them (vLLM runs on GPUs only): the SamplingParams
    arguments are recorded, each prompt is answered by one `stop` finish."""

    def __init__(self):
        super().__init__("vllm")
        self.__version__, self.sampling = "0.24.0", []
        record = self.sampling
        output = types.SimpleNamespace(index=0, text="15", token_ids=[5, 2], finish_reason="stop")

        class LLM:
            def __init__(self, **_):
                pass

            def generate(self, prompts, params):
                return [types.SimpleNamespace(outputs=[output]) for _ in prompts]

        self.LLM, self.SamplingParams = LLM, lambda **kwargs: record.append(kwargs) or kwargs


def test_vllm_scoring_stops_at_the_checkpoint_tokenizers_eos_and_turn_end(base_model_dir, monkeypatch):
    vllm = _RecordingVllm()
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    generator = VllmGenerator.open(str(base_model_dir), gpus=1)
    answers = generator.generate(["12 + 3 ="], max_new_tokens=16, batch_size=1, temperature=0.0, seed=0)
    prompt = generator.tokenizer("12 + 3 =", add_special_tokens=False).input_ids
    assert vllm.sampling == [{"temperature": 0.0, "top_p": 1.0, "max_tokens": 16, "n": 1,
                              "seed": request_seed(0, prompt), "stop_token_ids": [0, 2]}]
    assert answers[0].engine["finish_reason"] == "stop"


verl = pytest.importorskip("verl")
hydra = pytest.importorskip("hydra")


def test_verl_rollouts_read_a_generation_config_that_stops_at_the_turn_end(base_model_dir, tmp_path):
    """The override composes into verl's rollout config where its vLLM server reads engine_kwargs (verl:
    workers/rollout/vllm_rollout/vllm_async_server.py:287), and the folder it names holds, by verl's own
    loader, the model's generation config with eos_token_id [EOS, turn end]."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.model import get_generation_config

    files = RunFiles.in_state(tmp_path / "state")
    overrides = run_overrides(str(base_model_dir), GRPOSettings(), 1, gpus=1, cpus=2, files=files, attention="sdpa")
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with hydra.initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = hydra.compose(config_name="ppo_trainer", overrides=overrides)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    engine_kwargs = rollout.get("engine_kwargs", {}).get("vllm", {})
    assert GENERATION_CONFIG_KEY.rsplit(".", 1)[-1] in engine_kwargs
    assert engine_kwargs["generation_config"] == str(files.generation_config_dir)

    assert write_rollout_generation_config(str(base_model_dir), files.generation_config_dir) == [0, 2]
    assert get_generation_config(engine_kwargs["generation_config"]).eos_token_id == [0, 2]
    # the model's own generation config is kept; only its eos_token_id grows
    assert get_generation_config(str(base_model_dir)).eos_token_id == 0


@pytest.mark.parametrize("generation_eos, expected", [(None, [0, 2]), (0, [0, 2]), ([2, 0], [2, 0]), (7, [7, 0, 2])])
def test_the_rollouts_eos_ids_keep_the_models_own_first(generation_eos, expected):
    assert rollout_eos_ids(generation_eos, base_tokenizer()) == expected
