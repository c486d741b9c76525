# clinfer verify (src/verify.c): every kernel path against the reference backend op by op on tiny
# models, and a corrupted kernel output (CLINFER_FAULT="corrupt-<op>:N:V") named as the failing op.
clinfer_test(test_verify SOURCES test_verify.c tiny_model.c)
if(CLINFER_SANITIZE)
  # Under ctest, LeakSanitizer's tracer dies (SIGSEGV in its stop-the-world, at exit) in about
  # one run of this test in three; run directly it never did in 14 runs, and no leak was ever
  # reported. Address and undefined-behaviour checks stay on; leaks are checked for the same
  # code by the other tests.
  set_tests_properties(test_verify PROPERTIES ENVIRONMENT
    "${CLINFER_TEST_ENV};ASAN_OPTIONS=use_sigaltstack=0:detect_leaks=0")
endif()
