# libclinfer.so exports exactly the functions of include/clinfer.h (hidden visibility and
# CLINFER_API), and the header marks each one it declares (tests/check_symbols.py).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME test_symbols
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_symbols.py ${CMAKE_C_COMPILER}
          ${CMAKE_NM} ${PROJECT_SOURCE_DIR}/include/clinfer.h $<TARGET_FILE:clinfer>)
set_tests_properties(test_symbols PROPERTIES LABELS quick)
