# Device layer, program builds and the kernel binary cache (backends/opencl/device.c, program.c),
# and `clinfer devices` (tools/cmd_devices.c).
clinfer_test(test_device SOURCES test_device.c)
clinfer_test(test_program_cache SOURCES test_program_cache.c)
clinfer_test(test_cli_devices SOURCES test_cli_devices.c ARGS $<TARGET_FILE:clinfer_cli>)
add_dependencies(test_cli_devices clinfer_cli)

# The same library with no OpenCL platform at all: an ICD folder without any driver in it, and
# no OCL_ICD_FILENAMES, which both loaders (ocl-icd, Khronos') read before the folder (CUDA images
# set it to name their drivers).
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/no-icd)
add_test(NAME test_device_no_platform COMMAND test_device --no-platform)
set_tests_properties(test_device_no_platform PROPERTIES LABELS quick
  ENVIRONMENT "${CLINFER_TEST_ENV};OCL_ICD_VENDORS=${CMAKE_CURRENT_BINARY_DIR}/no-icd"
  ENVIRONMENT_MODIFICATION "OCL_ICD_FILENAMES=unset:")
