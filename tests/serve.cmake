# clinfer serve (tools/serve*.c) on a tiny generated model over loopback: endpoints, streaming,
# concurrency, bad requests, disconnects, signals (tests/test_serve.py, curl and the standard
# library); HTTP framing and connection limits through raw sockets (tests/test_serve_http.py);
# the official openai and ollama clients from PyPI in a venv (skipped, 77, without the registry),
# and ollama's API through the standard library; a load test of 200 requests from 16 clients on
# 4 slots (seconds on the tiny model: quick); the default model on OpenCL (label model).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
# serve_test(NAME [PYPI CLIENT] [ARGS ...]): tests/NAME.py CLINFER WRITE_TINY_MODEL ARGS, label
# quick. PYPI: the script installs CLIENT from PyPI into a venv in the build tree, passed after
# the model writer (kept for later runs), and exits 77 (skipped) without the registry.
function(serve_test name)
  cmake_parse_arguments(T "" "PYPI" "ARGS" ${ARGN})
  set(props TIMEOUT 300)
  if(T_PYPI)
    set(T_ARGS ${CMAKE_CURRENT_BINARY_DIR}/serve-${T_PYPI}-venv ${T_ARGS})
    set(props TIMEOUT 900 SKIP_RETURN_CODE 77 RESOURCE_LOCK serve-${T_PYPI}-venv)
  endif()
  add_test(NAME ${name} COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/${name}.py
    $<TARGET_FILE:clinfer_cli> $<TARGET_FILE:write_tiny_model> ${T_ARGS})
  set_tests_properties(${name} PROPERTIES LABELS quick ${props} ENVIRONMENT "${CLINFER_TEST_ENV}")
endfunction()
serve_test(test_serve)
# HTTP framing and connections through raw sockets: smuggling shapes, Expect, 300 idle
# connections, deadlines, --max-connections (seconds on the tiny model: quick).
serve_test(test_serve_http)
# logprobs, n choices, tools, /tokenize /detokenize /props and their 400s (stdlib HTTP: quick).
serve_test(test_serve_features)
serve_test(test_serve_openai PYPI openai)
# ollama's API: NDJSON shapes, format, options and the 400s through the standard library; and
# the official ollama client from PyPI.
serve_test(test_serve_ollama_api)
serve_test(test_serve_ollama PYPI ollama)
serve_test(test_serve_load ARGS $<$<BOOL:${CLINFER_SANITIZE}>:--sanitized>)
# The default model on OpenCL (label model; skipped without $CLINFER_MODEL).
add_test(NAME test_serve_model COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_model.py $<TARGET_FILE:clinfer_cli>)
set_tests_properties(test_serve_model PROPERTIES LABELS model TIMEOUT 600 SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# The openai client's parse() with a Pydantic model on the default model, 50 requests (label
# model; in test_serve_openai's venv).
add_test(NAME test_serve_openai_model COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_openai.py $<TARGET_FILE:clinfer_cli>
  $<TARGET_FILE:write_tiny_model> ${CMAKE_CURRENT_BINARY_DIR}/serve-openai-venv --default-model)
set_tests_properties(test_serve_openai_model PROPERTIES LABELS model TIMEOUT 900
  SKIP_RETURN_CODE 77 RESOURCE_LOCK serve-openai-venv ENVIRONMENT "${CLINFER_TEST_ENV}")
# The tool-call grammars and readers of every format, Mistral's included, without a model (C).
clinfer_test(test_serve_tools SOURCES test_serve_tools.c ${PROJECT_SOURCE_DIR}/tools/serve_tools.c
  ${PROJECT_SOURCE_DIR}/tools/serve_tool_calls.c ${PROJECT_SOURCE_DIR}/tools/serve_request.c
  ${PROJECT_SOURCE_DIR}/tools/serve_json_strict.c ${PROJECT_SOURCE_DIR}/tools/serve_error.c)
target_include_directories(test_serve_tools PRIVATE ${PROJECT_SOURCE_DIR}/tools
  ${PROJECT_SOURCE_DIR}/src)
# The chat page at / in headless Chromium from Debian, over the DevTools protocol (label browser
# only, not quick; skipped, 77, without chromium).
add_test(NAME test_serve_page COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_page.py $<TARGET_FILE:clinfer_cli>
  $<TARGET_FILE:write_tiny_model>)
set_tests_properties(test_serve_page PROPERTIES LABELS browser TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
