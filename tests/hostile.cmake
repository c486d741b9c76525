# Hostile input and faults beyond the GGUF reader: lying model metadata and odd prompts through
# the API, the CLI on every bad file, OpenCL failures injected along the model path.
clinfer_test(test_hostile_model SOURCES test_hostile_model.c tiny_model.c)
# A tiny model on demand, for scripts running the clinfer binary (tools/valgrind.sh).
add_executable(write_tiny_model write_tiny_model.c tiny_model.c)
target_include_directories(write_tiny_model PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(write_tiny_model PRIVATE clinfer_testutil clinfer_static ${CLINFER_PRIVATE_LIBS})
add_test(NAME test_hostile_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile_cli.sh
  $<TARGET_FILE:clinfer_cli> $<TARGET_FILE:test_gguf_corpus> $<TARGET_FILE:test_hostile_model>)
set_tests_properties(test_hostile_cli PROPERTIES LABELS quick ENVIRONMENT "${CLINFER_TEST_ENV}")
# OpenCL allocation, build and launch failures injected along model load and generation.
clinfer_test(test_model_faults SOURCES test_model_faults.c tiny_model.c)
# valgrind memcheck on `clinfer run` (reference and OpenCL) through tools/valgrind.sh; not in
# the sanitizer build, whose runtime cannot run under valgrind.
find_program(CLINFER_VALGRIND valgrind)
if(CLINFER_VALGRIND AND NOT CLINFER_SANITIZE)
  add_test(NAME valgrind_run COMMAND bash ${PROJECT_SOURCE_DIR}/tools/valgrind.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(valgrind_run PROPERTIES LABELS slow TIMEOUT 900
    ENVIRONMENT "${CLINFER_TEST_ENV}")
endif()
