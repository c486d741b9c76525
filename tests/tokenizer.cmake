# Tokenizers: the shared vocab vectors, one entry per vocabulary file.
foreach(vocab gpt-2 llama-spm bert-bge)
  clinfer_test(test_tokenizer_${vocab} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_vocab.c
    ARGS ${vocab})
endforeach()
clinfer_test(test_tokenizer_pretok SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_pretok.c)

# `clinfer tokenize` on a vocab-only file: GPT-2's ids for "Hello world" (as in the vectors),
# and a one-line error for a file that is not GGUF.
set(CLINFER_GPT2_VOCAB ${PROJECT_SOURCE_DIR}/../shared/vocab/ggml-vocab-gpt-2.gguf)
add_test(NAME cli_tokenize COMMAND clinfer_cli tokenize -m ${CLINFER_GPT2_VOCAB} "Hello world")
set_tests_properties(cli_tokenize PROPERTIES LABELS quick PASS_REGULAR_EXPRESSION "^15496 995\n$")
add_test(NAME cli_tokenize_not_gguf
  COMMAND clinfer_cli tokenize -m ${CMAKE_CURRENT_LIST_FILE} "Hello")
set_tests_properties(cli_tokenize_not_gguf PROPERTIES LABELS quick WILL_FAIL TRUE)
clinfer_test(test_tokenizer_load SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_load.c)
