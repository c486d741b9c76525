# The OpenCL backend's non-matmul ops against the reference backend, once per kernel path (the
# GPU paths are forced on whatever device there is, so they are proven on PoCL too), and the
# fault-injection checks of the backend's failure paths.
clinfer_test(test_cl_ops SOURCES test_cl_ops.c ENV CLINFER_KERNEL_PATH=cpu-rows)
foreach(path gpu-local-reduce)
  add_test(NAME test_cl_ops_${path} COMMAND test_cl_ops)
  set_tests_properties(test_cl_ops_${path} PROPERTIES LABELS quick SKIP_RETURN_CODE 77
    ENVIRONMENT "${CLINFER_TEST_ENV};CLINFER_KERNEL_PATH=${path}")
endforeach()
clinfer_test(test_cl_faults SOURCES test_cl_faults.c)
