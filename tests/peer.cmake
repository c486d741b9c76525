# Against llama.cpp (label peer): where bench/compare_llamacpp.sh has built the peer in its cache,
# clinfer quantize and llama-quantize on one F16 file give perplexities within 1% of each other,
# scored by both tools (bench/quantize_compare.sh); skipped (77) without the peer.
add_test(NAME quantize_compare
  COMMAND bash ${PROJECT_SOURCE_DIR}/bench/quantize_compare.sh --bin $<TARGET_FILE:clinfer_cli>)
set_tests_properties(quantize_compare PROPERTIES LABELS peer SKIP_RETURN_CODE 77 TIMEOUT 1200
  ENVIRONMENT "${CLINFER_TEST_ENV}")
