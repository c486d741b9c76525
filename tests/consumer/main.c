/* A program built against the installed clinfer: it must find the header, link (shared or
 * static with the dependencies the package names) and enumerate devices. */
#include <stdio.h>
#include <string.h>

#include <clinfer.h>

int main(void) {
    size_t count = 0;
    clinfer_status st = clinfer_device_count(&count);
    if (st != CLINFER_OK) {
        fprintf(stderr, "clinfer_device_count: %s\n", clinfer_status_str(st));
        return 1;
    }
    if (strcmp(clinfer_status_str(CLINFER_ERR_BUILD), "CLINFER_ERR_BUILD") != 0) return 1;
    printf("clinfer %s: %zu device(s)%s%s\n", CLINFER_VERSION_STRING, count, count ? "" : ": ",
           count ? "" : clinfer_last_error());
    return 0;
}
