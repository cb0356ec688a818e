"""The loopback server's sampled generation: seeded draws, n, stop strings, log-probabilities of generated tokens
(both answer shapes), the chat route and its template, and the switches that mimic other servers. No Ray."""
from __future__ import annotations

import pytest

from scoring.api.client import ApiConfig, ApiFatal, CompletionsClient
from scoring.api.loopback import LoopbackServer
from scoring.generation.probe import probe_generation


def client(url: str, chat: bool = False) -> CompletionsClient:
    return CompletionsClient(ApiConfig(base=url, model="loopback", mode="none", max_retries=0),
                             endpoint="chat/completions" if chat else "completions")


def texts(resp: dict, chat: bool = False) -> list[str]:
    return [c["message"]["content"] if chat else c["text"] for c in resp["choices"]]


def test_seeded_samples_reproduce_and_n_draws_several(generation_lm):
    with LoopbackServer(generation_lm["model"]) as srv:
        c = client(srv.url)
        body = {"prompt": "The President spoke to the Congress", "max_tokens": 12, "temperature": 1.0, "seed": 7}
        a, b = c.complete(body), c.complete(body)
        assert texts(a) == texts(b)
        three = c.complete({**body, "n": 3, "top_p": 0.9})
        assert len(set(texts(three))) == 3  # three draws from one seeded generator
        prompt_ids = srv.tokenizer(body["prompt"], add_special_tokens=False)["input_ids"]
        assert three["usage"]["prompt_tokens"] == len(prompt_ids) and 3 <= three["usage"]["completion_tokens"] <= 36
        greedy = {"prompt": "The President spoke to the Congress", "max_tokens": 8, "temperature": 0}
        assert texts(c.complete(greedy)) == texts(c.complete({**greedy, "seed": 99}))


def test_stop_strings_and_generated_logprobs(generation_lm):
    with LoopbackServer(generation_lm["model"]) as srv:
        c = client(srv.url)
        greedy = {"prompt": "The President spoke to the Congress", "max_tokens": 12, "temperature": 0}
        full = texts(c.complete(greedy))[0]
        word = full.split()[1]
        cut = c.complete({**greedy, "stop": [word]})
        assert word not in texts(cut)[0] and full.startswith(texts(cut)[0])
        assert cut["choices"][0]["finish_reason"] == "stop"
        lp = c.complete({**greedy, "max_tokens": 3, "logprobs": 4})["choices"][0]["logprobs"]
        # one value per generated token (at most 3: the end-of-text token ends it sooner), the top 4 at each
        assert 1 <= len(lp["token_logprobs"]) <= 3 and len(lp["tokens"]) == len(lp["token_logprobs"])
        assert all(len(t) == 4 for t in lp["top_logprobs"])
        chat = client(srv.url, chat=True).complete({"messages": [{"role": "user", "content": "The President"}],
                                                    "max_tokens": 3, "temperature": 0, "logprobs": True,
                                                    "top_logprobs": 2})
        content = chat["choices"][0]["logprobs"]["content"]
        assert 1 <= len(content) <= 3 and all(len(t["top_logprobs"]) == 2 for t in content)
        assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"


def test_a_chat_request_is_the_joined_messages_for_a_model_without_a_template(generation_lm):
    with LoopbackServer(generation_lm["model"]) as srv:
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "The President spoke"}]
        chat = client(srv.url, chat=True).complete({"messages": msgs, "max_tokens": 6, "temperature": 0})
        plain = client(srv.url).complete({"prompt": "Be brief.\n\nThe President spoke", "max_tokens": 6,
                                          "temperature": 0})
        assert texts(chat, chat=True) == texts(plain)


def test_the_probe_learns_what_each_server_honours(generation_lm):
    with LoopbackServer(generation_lm["model"]) as srv:
        full = probe_generation(client(srv.url), chat=False)
        assert (full["n"], full["seed_accepted"], full["seed_reproducible"], full["top_p"], full["generated_logprobs"]) \
            == (True, True, True, True, True)
    with LoopbackServer(generation_lm["model"], honour_n=False, honour_seed=False) as srv:
        p = probe_generation(client(srv.url, chat=True), chat=True)
        assert p["n"] is False and p["seed_reproducible"] is False and p["endpoint"] == "chat/completions"


def test_the_wrong_endpoint_says_which_flag_fixes_it(generation_lm):
    with LoopbackServer(generation_lm["model"], endpoints=("chat",)) as srv:
        with pytest.raises(ApiFatal, match="add --api-chat"):
            probe_generation(client(srv.url), chat=False)
    with LoopbackServer(generation_lm["model"], endpoints=("completions",)) as srv:
        with pytest.raises(ApiFatal, match="drop --api-chat"):
            probe_generation(client(srv.url, chat=True), chat=True)


def test_a_script_answers_instead_of_the_model(generation_lm):
    def script(body, prompt):
        return "B" if "Question" in prompt else None

    with LoopbackServer(generation_lm["model"], script=script) as srv:
        c = client(srv.url, chat=True)
        asked = c.complete({"messages": [{"role": "user", "content": "Question: which?"}], "max_tokens": 4,
                            "temperature": 0})
        assert texts(asked, chat=True) == ["B"]
        free = c.complete({"messages": [{"role": "user", "content": "The President"}], "max_tokens": 4,
                           "temperature": 0})
        assert texts(free, chat=True) != ["B"]
