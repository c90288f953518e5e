#!/usr/bin/python3
"""input.chat's rendering (src/io/chat.c) equals the real chat templates rendered by Jinja
(python3-jinja2, with Hugging Face's apply_chat_template settings: trim_blocks, lstrip_blocks,
raise_exception, add_generation_prompt=True) for one user turn, for each family tripar
recognises: ChatML (SmolLM2's template from its GGUF, Qwen2's, both with a default system turn),
Llama 3, and [INST] (Llama 2's, which strips the message, and Mistral's, which does not).
Templates of other families, and a Llama 3.1-style one with its own system turn, are refused
(exit 2) with the template's first characters and the families named.

Usage: chat_template_check.py CHAT_RENDER TEMPLATE_DIR WORKDIR"""
import json
import os
import subprocess
import sys

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("skipped: python3-jinja2 is not installed (tools/setup.sh installs it)")
    sys.exit(77)

# (template file, bos text, family)
TEMPLATES = [("smollm2.jinja", "<|im_start|>", "ChatML"), ("qwen2.jinja", None, "ChatML"),
             ("llama3.jinja", "<|begin_of_text|>", "Llama 3"),
             ("llama2.jinja", "<s>", "Llama 2/Mistral [INST]"),
             ("mistral.jinja", "<s>", "Llama 2/Mistral [INST]")]
TEXTS = ["What is the capital of France?", "  padded on both sides \n\n", "\tTabs\tand\nlines\n",
         "Ünïcödé — 東京 😀", "x", "<|im_end|> inside [INST] the text", "\u3000ideographic\u2003",
         "quotes ' \" and \\ backslash", "\x1cseparator\x1f"]
# Other families and variants, refused
REFUSED = {
    "gemma": "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] "
             "+ '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
             "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    "zephyr": "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + "
              "message['content'] + eos_token }}{% endfor %}",
    "llama31": "{{- bos_token }}{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
               "{{- 'Cutting Knowledge Date: December 2023\\n' }}{{- '<|eot_id|>' }}"
               "{% for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
               "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
               "{% endfor %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}",
    "unclosed": "{{ '<|im_start|>user\n' + message['content']",
    "raw": "User: {{ messages[0]['content'] }}\nAssistant:",
}


def jinja_render(template, bos, text):
    """What transformers' apply_chat_template renders (its environment, in a sandbox)."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=[{"role": "user", "content": text}], add_generation_prompt=True,
        bos_token=bos or "", eos_token="</s>")


def main(tool, tdir, work):
    os.makedirs(work, exist_ok=True)
    texts = os.path.join(work, "texts.json")
    with open(texts, "w") as f:
        json.dump(TEXTS, f)
    for name, bos, family in TEMPLATES:
        path = os.path.join(tdir, name)
        with open(path, encoding="utf-8") as f:
            template = f.read()
        r = subprocess.run([tool, path, bos or "-", texts], capture_output=True, text=True)
        assert r.returncode == 0, f"{name}: refused:\n{r.stderr}"
        got = json.loads(r.stdout)
        assert got["family"] == family, f"{name}: family {got['family']!r}, expected {family!r}"
        for text, rendered in zip(TEXTS, got["rendered"]):
            want = jinja_render(template, bos, text)
            assert rendered == want, f"{name}: {text!r}:\n tripar {rendered!r}\n jinja  {want!r}"
        print(f"{name}: {family}, {len(TEXTS)} texts as Jinja renders them")
    for name, template in REFUSED.items():
        path = os.path.join(work, name + ".jinja")
        with open(path, "w") as f:
            f.write(template)
        r = subprocess.run([tool, path, "<s>", texts], capture_output=True, text=True)
        assert r.returncode == 2, f"{name}: not refused (exit {r.returncode}): {r.stdout}"
        head = template[:20].replace("\n", "\\n").replace('"', '\\"')
        for part in ("input.chat", head, "ChatML", "Llama 3", "[INST]"):
            assert part in r.stderr, f"{name}: the refusal does not say {part!r}:\n{r.stderr}"
        print(f"{name}: refused: {r.stderr.strip()[:160]}...")
    # A template that writes bos_token, for a tokenizer without one
    r = subprocess.run([tool, os.path.join(tdir, "llama3.jinja"), "-", texts],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "bos_token" in r.stderr, r.stderr
    print("chat_template_check: passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: chat_template_check.py CHAT_RENDER TEMPLATE_DIR WORKDIR")
    main(*sys.argv[1:])
