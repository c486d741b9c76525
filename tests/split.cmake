# Layers split across devices (src/placement.c, src/split_plan.c): PoCL presents two CPU devices
# with POCL_DEVICES="pthread pthread", each on all cores. test_split: a tiny model's logits split
# by shares, -ngl and memory against one device's, single steps and batches, verify on a split,
# refusals; test_split_cli: the CLI's flags (info, run, serve) and their refusals. Both skip
# (77) with fewer than two PoCL devices. Seconds: quick.
set(CLINFER_SPLIT_ENV "POCL_DEVICES=pthread pthread")
clinfer_test(test_split SOURCES test_split.c tiny_model.c ENV ${CLINFER_SPLIT_ENV})
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME test_split_cli COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_split_cli.py $<TARGET_FILE:clinfer_cli>
  $<TARGET_FILE:write_tiny_model>)
set_tests_properties(test_split_cli PROPERTIES LABELS quick SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "${CLINFER_TEST_ENV};${CLINFER_SPLIT_ENV}")

# bench/split_decode.sh's program (not a test): a split's decode time against its layers' alone.
add_executable(bench_split ${PROJECT_SOURCE_DIR}/bench/bench_split.c)
target_link_libraries(bench_split PRIVATE clinfer_static ${CLINFER_PRIVATE_LIBS})
