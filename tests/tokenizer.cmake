# Tokenizers: llama.cpp's vocab vectors (tools/fetch_vocab.sh), one entry per vocabulary file;
# skipped when the files are not there.
foreach(vocab gpt-2 llama-spm bert-bge)
  clinfer_test(test_tokenizer_${vocab} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_vocab.c
    ARGS ${vocab})
endforeach()
clinfer_test(test_tokenizer_pretok SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_pretok.c)

# `clinfer tokenize` on a vocab-only file: GPT-2's ids for "Hello world" (as in the vectors),
# and a one-line error for a file that is not GGUF. with_vocab.sh finds the file when the test
# runs (the directory may be set after configuring) and skips without it.
add_test(NAME cli_tokenize COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/with_vocab.sh
  ggml-vocab-gpt-2.gguf $<TARGET_FILE:clinfer_cli> tokenize -m {} "Hello world")
set_tests_properties(cli_tokenize PROPERTIES LABELS quick PASS_REGULAR_EXPRESSION "^15496 995\n$"
  SKIP_RETURN_CODE 77 ENVIRONMENT "${CLINFER_TEST_ENV}")
add_test(NAME cli_tokenize_not_gguf
  COMMAND clinfer_cli tokenize -m ${CMAKE_CURRENT_LIST_FILE} "Hello")
set_tests_properties(cli_tokenize_not_gguf PROPERTIES LABELS quick WILL_FAIL TRUE)
clinfer_test(test_tokenizer_load SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_load.c)
