/* Tokenizers loaded from a GGUF file's tokenizer.ggml.* metadata:
 *   "gpt2"   byte-level BPE: pre-tokenizer regexes chosen by tokenizer.ggml.pre, merge ranks
 *            (a few families merge UTF-8 with U+2581 for spaces instead);
 *   "gemma4" BPE over UTF-8, U+2581 for spaces, <0xXX> byte fallback;
 *   "whitespace" BPE over UTF-8 runs between whitespace, which is dropped;
 *   "llama"  SentencePiece BPE: score-driven merges, U+2581 for spaces, <0xXX> byte fallback;
 *   "bert"   WordPiece: BERT normalisation, greedy longest match, [UNK] for unknown words;
 *   "t5"     SentencePiece unigram: precompiled normalisation, best-scoring segmentation;
 *   "rwkv"   escaped byte strings, greedy longest match;
 *   "plamo2" least-cost segmentation over code points, <0xXX> byte fallback.
 * A loaded vocabulary is read-only, so one may be shared by threads. */
#ifndef CLINFER_TOKENIZER_H
#define CLINFER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"
#include "gguf.h"

typedef struct clinfer_vocab clinfer_vocab;

/* Validates the metadata (tokens, scores length >= n_vocab when present, token types, merges,
 * special ids in range) and copies what it needs: the file may be closed afterwards. */
clinfer_status vocab_load(const gguf_file *f, clinfer_vocab **out);
void vocab_free(clinfer_vocab *v);
/* The index-th tokenizer.ggml.model value it reads (from 0); NULL past the last. */
const char *vocab_model_at(size_t index);
/* Whether the file has a vocabulary: tokenizer.ggml.model is there and not "none" or
 * "no_vocab" (llama.cpp's names for a model without one). */
bool vocab_present(const gguf_file *f);

size_t vocab_n_tokens(const clinfer_vocab *v);
/* Special ids, -1 when the vocabulary has none. For WordPiece, BOS is [CLS]. */
int32_t vocab_bos(const clinfer_vocab *v);
int32_t vocab_eos(const clinfer_vocab *v);
int32_t vocab_eot(const clinfer_vocab *v);
int32_t vocab_eom(const clinfer_vocab *v);
/* Whether prompts start with BOS: tokenizer.ggml.add_bos_token, else the model type's default
 * (SentencePiece and WordPiece yes, byte-level BPE no). */
bool vocab_add_bos(const clinfer_vocab *v);
/* End of generation: EOS, EOT, EOM and control tokens such as <|im_end|> or <|eot_id|>. */
bool vocab_is_eog(const clinfer_vocab *v, int32_t id);

/* Tokenizes len bytes of text. add_bos adds the vocabulary's special tokens: BOS first
 * (WordPiece: [CLS] ... [SEP]), and EOS last where tokenizer.ggml.add_eos_token (T5's default)
 * says; parse_special matches control tokens' text ("<|im_start|>"); user-defined tokens always
 * match. Writes up to cap ids; *n_out receives the count needed, and the call returns
 * CLINFER_ERR_BUFFER_TOO_SMALL when it exceeds cap. Invalid UTF-8 never fails: bad bytes are
 * single-byte characters (WordPiece drops them, as BERT's cleaning drops U+FFFD). */
clinfer_status vocab_tokenize(const clinfer_vocab *v, const char *text, size_t len, bool add_bos,
                              bool parse_special, int32_t *out, size_t cap, size_t *n_out);
/* The same over the n pieces' concatenation, each with its own parse_special
 * (clinfer_tokenize_pieces); vocab_tokenize is its one piece. */
clinfer_status vocab_tokenize_pieces(const clinfer_vocab *v, const clinfer_text_piece *pieces,
                                     size_t n, bool add_bos, int32_t *out, size_t cap,
                                     size_t *n_out);

/* The bytes token id stands for (not NUL-terminated, maybe part of a UTF-8 character): byte-level
 * BPE maps its characters back to bytes, SentencePiece turns U+2581 into a space and <0xXX> into
 * the byte, WordPiece turns the word-start U+2581 (the GGUF form of a piece without "##") into a
 * space. Control and user-defined tokens give their text. *len receives the size needed;
 * CLINFER_ERR_BUFFER_TOO_SMALL when it exceeds cap. */
clinfer_status vocab_piece(const clinfer_vocab *v, int32_t id, char *buf, size_t cap, size_t *len);

/* The id of the token whose text is exactly these bytes, or -1. */
int32_t vocab_find(const clinfer_vocab *v, const char *text, size_t len);

#endif
