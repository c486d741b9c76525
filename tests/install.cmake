# `cmake --install` into a temporary prefix, then consumers built with find_package(clinfer)
# and with pkg-config, shared and static (tests/consumer).
add_test(NAME install_consumers
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.sh ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR}
          ${CMAKE_CURRENT_SOURCE_DIR}/consumer ${CMAKE_CURRENT_BINARY_DIR}/consumer-work
          ${CMAKE_C_COMPILER} $<TARGET_FILE:write_tiny_model>)
set_tests_properties(install_consumers PROPERTIES LABELS quick
  ENVIRONMENT "${CLINFER_TEST_ENV}")
