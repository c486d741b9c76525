# The layers of docs/ARCHITECTURE.md: no file calls or includes one above it, no call cycle
# among files (tests/check_layers.py, from nm of the library's and the CLI's objects).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME check_layers
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.py ${PROJECT_SOURCE_DIR}
          $<TARGET_OBJECTS:clinfer_objects> $<TARGET_OBJECTS:clinfer_cli>
  COMMAND_EXPAND_LISTS)
set_tests_properties(check_layers PROPERTIES LABELS quick TIMEOUT 120)

# No source file outside tests/ over 600 lines (tests/check_file_lines.py).
add_test(NAME check_file_lines
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_file_lines.py ${PROJECT_SOURCE_DIR})
set_tests_properties(check_file_lines PROPERTIES LABELS quick TIMEOUT 60)
