/* clinfer_version: the version the library was built as. The header's CLINFER_VERSION_* lines
 * are the one place the version is written (CMakeLists.txt reads the project's from them), so a
 * program compares this with the CLINFER_VERSION_STRING it was compiled against. */
#include "clinfer.h"

const char *clinfer_version(void) {
    return CLINFER_VERSION_STRING;
}
