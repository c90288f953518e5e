/* input.chat: one user turn rendered through a model's chat template. The template is Jinja;
 * tripar does not run it (no Debian C library runs Jinja, and a hand-written engine would be a
 * parser of a whole language), it recognises the family from the template's text and renders
 * that family's format. docs/tokenizer.md, "Chat templates". */
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CHAT_CHATML = 0, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2) */
    CHAT_LLAMA3,     /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    CHAT_INST,       /* [INST] ... [/INST] (Llama 2, Mistral) */
} chat_family;

/* "ChatML", "Llama 3", "Llama 2/Mistral [INST]". */
const char *chat_family_name(chat_family f);

/* What the template renders, with add_generation_prompt, for messages = [{role: user, content:
 * user}]: into *out (malloc'ed, NUL-terminated). bos_text is the text of the bos token (what
 * Jinja's bos_token holds), NULL when the tokenizer has none. Returns 0 with *family set, or
 * STATUS_BAD_INPUT with error_message() saying what was found (the template's first characters)
 * and the families tripar renders; `where` prefixes the message. */
int chat_render(const char *tmpl, const char *bos_text, const char *user, const char *where,
                chat_family *family, char **out);

#ifdef __cplusplus
}
#endif
