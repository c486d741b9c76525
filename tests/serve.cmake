# clinfer serve (tools/serve*.c) on a tiny generated model over loopback: endpoints, streaming,
# concurrency, bad requests, disconnects, signals (tests/test_serve.py, curl and the standard
# library); HTTP framing and connection limits through raw sockets (tests/test_serve_http.py);
# the official openai client from PyPI in a venv (skipped, 77, without the registry); a load
# test of 200 requests from 16 clients on 4 slots (seconds on the tiny model: quick); the
# default model on OpenCL (label model).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME test_serve COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_serve.py
  $<TARGET_FILE:clinfer_cli> $<TARGET_FILE:write_tiny_model>)
set_tests_properties(test_serve PROPERTIES LABELS quick TIMEOUT 300
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# HTTP framing and connections through raw sockets: smuggling shapes, Expect, 300 idle
# connections, deadlines, --max-connections (seconds on the tiny model: quick).
add_test(NAME test_serve_http COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_http.py $<TARGET_FILE:clinfer_cli>
  $<TARGET_FILE:write_tiny_model>)
set_tests_properties(test_serve_http PROPERTIES LABELS quick TIMEOUT 300
  ENVIRONMENT "${CLINFER_TEST_ENV}")
add_test(NAME test_serve_openai COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_openai.py $<TARGET_FILE:clinfer_cli>
  $<TARGET_FILE:write_tiny_model> ${CMAKE_CURRENT_BINARY_DIR}/serve-openai-venv)
set_tests_properties(test_serve_openai PROPERTIES LABELS quick TIMEOUT 900 SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
add_test(NAME test_serve_load COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_load.py $<TARGET_FILE:clinfer_cli>
  $<TARGET_FILE:write_tiny_model> $<$<BOOL:${CLINFER_SANITIZE}>:--sanitized>)
set_tests_properties(test_serve_load PROPERTIES LABELS quick TIMEOUT 300
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# The default model on OpenCL (label model; skipped without $CLINFER_MODEL).
add_test(NAME test_serve_model COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_model.py $<TARGET_FILE:clinfer_cli>)
set_tests_properties(test_serve_model PROPERTIES LABELS model TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
