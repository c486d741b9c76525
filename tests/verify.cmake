# clinfer verify (src/verify.c): every kernel path against the reference backend op by op on tiny
# models, and a corrupted kernel output (CLINFER_FAULT="corrupt-<op>:N:V") named as the failing op.
clinfer_test(test_verify SOURCES test_verify.c tiny_model.c)
