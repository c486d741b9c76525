# Sampling, chat templates and the clinfer command line (on a tiny generated model and the
# reference backend: no device or download needed; verify checks OpenCL where there is a device).
clinfer_test(test_sampler SOURCES test_sampler.c)
clinfer_test(test_chat SOURCES test_chat.c)
clinfer_test(test_cli SOURCES test_cli.c tiny_model.c gguf_writer.c ARGS $<TARGET_FILE:clinfer_cli>)
# Logits of every position and `clinfer perplexity` / KL divergence on a tiny model.
clinfer_test(test_perplexity SOURCES test_perplexity.c tiny_model.c ARGS $<TARGET_FILE:clinfer_cli>)
# Ctrl-C during a chat answer stops the answer, not the session (the default model: answers
# long enough to interrupt; $CLINFER_MODEL, skipped without it).
add_test(NAME test_chat_interrupt
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_chat_interrupt.sh $<TARGET_FILE:clinfer_cli>)
set_tests_properties(test_chat_interrupt PROPERTIES LABELS model SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# clinfer pull / models / -m NAME and tools/fetch_model.sh, offline (wheels made by the test).
add_test(NAME test_models
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_models.sh $<TARGET_FILE:clinfer_cli>
          $<TARGET_FILE:write_tiny_model>)
set_tests_properties(test_models PROPERTIES LABELS quick SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
# Chat formats against the families' own Jinja templates (llama.cpp's models/templates from the
# llama-cpp-python sdist, rendered by Jinja2 as transformers does): identical text. Skipped (77)
# without the sdist (tools/fetch_llamacpp_sdist.sh) or python3-jinja2.
add_executable(chat_render_stdin chat_render_stdin.c)
target_link_libraries(chat_render_stdin PRIVATE clinfer_testutil ${CLINFER_PRIVATE_LIBS})
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME test_chat_jinja COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_LIST_DIR}/test_chat_jinja.py $<TARGET_FILE:chat_render_stdin>)
set_tests_properties(test_chat_jinja PROPERTIES LABELS quick SKIP_RETURN_CODE 77
  ENVIRONMENT "${CLINFER_TEST_ENV}")
