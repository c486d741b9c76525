/* The vocabulary's layout, shared by the tokenizer files (tokenizer.c loads it and dispatches;
 * tok_bpe.c, tok_dna.c, tok_spm.c, tok_wpm.c, tok_ugm.c, tok_rwkv.c, tok_plamo2.c hold the
 * algorithms;
 * tok_merge.c the shared pair merging, tok_prefix.c the prefix search; tok_pretok.c and
 * tok_pretok_table.c the regex pre-tokenizers; tok_util.c the small helpers they all use: id
 * lists, UTF-8 lengths, white space, position tables, space escaping). Not for use outside the
 * tokenizer. */
#ifndef CLINFER_TOK_INTERNAL_H
#define CLINFER_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tok_strmap.h"
#include "tokenizer.h"

typedef enum { TOK_BPE, TOK_SPM, TOK_WPM, TOK_UGM, TOK_RWKV, TOK_PLAMO2 } tok_model;

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

typedef struct {
    const char *text; /* in the arena; len bytes, then a NUL (but for hybriddna's k-mers) */
    uint32_t len;
    int32_t type;
    float score;
} tok_entry;

typedef struct tok_pretok tok_pretok;

/* Token ids sorted by text (tok_prefix.c). */
typedef struct {
    int32_t *ids;
    size_t n;
} tok_prefix_index;

/* Whether prompts start with BOS: by default no or yes (tokenizer.ggml.add_bos_token decides
 * when present), or always (llama.cpp overrides the metadata for Gemma 4). */
typedef enum { TOK_BOS_NO, TOK_BOS_YES, TOK_BOS_ALWAYS } tok_bos;

/* How a BPE vocabulary's family treats text besides its regexes. */
typedef struct {
    bool ignore_merges; /* a word that is a token is taken whole, without merging (Llama 3) */
    bool raw_bytes;     /* words stay UTF-8 (no GPT-2 byte stand-ins); <0xXX> byte fallback */
    bool escape_spaces; /* spaces become U+2581 before splitting (SentencePiece-style BPE) */
    bool newline_words; /* a word of line feeds only is taken whole when a token (Gemma 4) */
    tok_bos add_bos;
} tok_pretok_traits;

#define TOK_MAX_EOG 16

struct clinfer_vocab {
    tok_model model;
    size_t n_tokens;
    tok_entry *tokens;
    char *arena; /* every token and merge text */
    tok_strmap by_text;
    tok_strmap merge_rank; /* "left right" -> rank (byte-level BPE) */
    size_t max_token_len;  /* bytes, bounds WordPiece's longest-match search */

    /* Tokens matched in the text before the model runs: control, user-defined and unknown ones,
     * ordered by first byte, then longest first; first_special[b] .. first_special[b+1] is the
     * range starting with byte b. */
    int32_t *specials;
    uint32_t first_special[257];

    int32_t bos, eos, eot, eom, unk, sep;
    int32_t eog[TOK_MAX_EOG];
    size_t n_eog;
    bool add_bos;
    bool add_space_prefix; /* SentencePiece: a space before the text, as SentencePiece adds */

    tok_pretok *pretok;           /* BPE */
    bool drop_whitespace;         /* BPE of the "whitespace" model: whitespace only separates */
    struct {                      /* BPE of the "hybriddna" model (tok_dna.c) */
        int32_t open, close, oov; /* <dna> </dna> <oov>, -1 where absent */
        bool on;                  /* all three are there: <dna> blocks are DNA */
    } dna;
    bool lowercase;     /* WordPiece and whitespace: tokenizer.ggml.normalizer.lowercase */
    bool strip_accents; /* WordPiece: tokenizer.ggml.normalizer.strip_accents */
    tok_pretok_traits bpe;
    char byte_char[256][3];  /* byte-level BPE: the UTF-8 of each byte's stand-in character */
    int16_t char_byte[512];  /* ... and back: code point -> byte, -1 where none */
    int32_t byte_token[256]; /* the id of <0xXX> (byte fallback), -1 where absent */

    tok_prefix_index rwkv_index;   /* RWKV: every token, by (unescaped) text */
    tok_prefix_index plamo2_index; /* PLaMo 2: the tokens but bytes */
    bool add_eos; /* add_bos requests also end with EOS (tokenizer.ggml.add_eos_token) */
    struct {      /* unigram (tok_ugm.c) */
        unsigned char *charsmap; /* tokenizer.ggml.precompiled_charsmap, NULL when none */
        const unsigned char *trie;
        uint32_t n_nodes;
        const char *repl; /* the replacements after the trie */
        size_t repl_size;
        tok_prefix_index matchable; /* the tokens segments may use */
        double unknown_score;
        bool remove_extra_whitespaces;
    } ugm;
};

/* A growing list of ids. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} tok_ids;

clinfer_status tok_ids_push(tok_ids *out, int32_t id);

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's stand-in for a space (3 bytes of UTF-8). */
#define TOK_SPACE_MARK "\xe2\x96\x81"

/* A table of n + 1 entries of size bytes, one per byte position of a text of n bytes (which
 * must fit 32-bit offsets), for the segmenting tokenizers' dynamic programming. */
clinfer_status tok_alloc_positions(size_t n, size_t size, void **out);

/* Unicode's White_Space: the ASCII controls \t..\r, NEL, and the separators. */
bool tok_white_space(int32_t c);

/* The length of the UTF-8 character at s (at most n bytes), 1 for an invalid byte. */
size_t tok_char_len(const char *s, size_t n);

/* Each tokenizer appends the ids of one run of plain text (special tokens already taken out). */
clinfer_status tok_bpe_init(clinfer_vocab *v, const char *pre, size_t pre_len);
clinfer_status tok_bpe_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out);
/* hybriddna: finds its tokens and drops the marker from the k-mers' texts (tokens[], not
 * by_text); then, when dna.on, encodes runs with their <dna> blocks. */
void tok_dna_init(clinfer_vocab *v);
clinfer_status tok_dna_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out);
clinfer_status tok_spm_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out);
/* The text with each space written as U+2581 (and one more before it with prefix), in
 * *escaped (allocated, free() it), *n bytes long. */
clinfer_status tok_escape_spaces(const char *text, size_t len, bool prefix, char **escaped,
                                 size_t *n);
/* Every token whose text is a prefix of s, shortest first: start with a zeroed walk, call until
 * false; after each match w->depth is the token's length. keep chooses the tokens indexed
 * (tok_prefix_init). */
typedef struct {
    size_t lo, hi, depth;
    bool started;
} tok_prefix_walk;
clinfer_status tok_prefix_init(tok_prefix_index *ix, const clinfer_vocab *v,
                               bool (*keep)(const tok_entry *t));
bool tok_prefix_next(const tok_prefix_index *ix, const clinfer_vocab *v, const char *s, size_t len,
                     tok_prefix_walk *w, int32_t *id);

clinfer_status tok_ugm_init(clinfer_vocab *v, const gguf_file *f);
clinfer_status tok_ugm_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out);
/* RWKV's escapes undone in place; returns the new length. */
size_t tok_rwkv_unescape(char *s, size_t len);
clinfer_status tok_rwkv_init(clinfer_vocab *v);
clinfer_status tok_rwkv_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out);
clinfer_status tok_plamo2_init(clinfer_vocab *v);
clinfer_status tok_plamo2_encode(const clinfer_vocab *v, const char *text, size_t len,
                                 tok_ids *out);
clinfer_status tok_wpm_encode(const clinfer_vocab *v, const char *text, size_t len, tok_ids *out);

/* Repeated pair merging, shared by byte-level BPE and SentencePiece. The text starts as one
 * symbol per UTF-8 character; while some adjacent pair has a priority, the pair with the highest
 * (leftmost on ties) becomes one symbol. pair_priority sees the pair as left_len + right_len
 * bytes at left, may use scratch (room for both plus 2 bytes), and returns false when the pair
 * cannot merge. */
typedef bool (*tok_pair_priority)(const clinfer_vocab *v, const char *left, size_t left_len,
                                  size_t right_len, char *scratch, double *priority);
typedef struct {
    uint32_t off, len;
} tok_span;
/* *spans (allocated, free() it) receives the final symbols in order. */
clinfer_status tok_merge(const clinfer_vocab *v, const char *text, size_t len,
                         tok_pair_priority pair_priority, tok_span **spans, size_t *n_spans);

/* Pre-tokenizers: regexes that split text into words before BPE; *traits receives the
 * family's traits. An unknown name is CLINFER_ERR_UNSUPPORTED. */
clinfer_status tok_pretok_create(const char *name, size_t name_len, tok_pretok **out,
                                 tok_pretok_traits *traits);
void tok_pretok_free(tok_pretok *p);
/* *spans (allocated, free() it) receives the words, covering every byte of the text. */
clinfer_status tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **spans,
                                size_t *n_spans);

#endif
