/* knit_version(): the KNIT_VERSION_* macros of <knit/knit.h> as a string. */
#include "knit/knit.h"

#define KNIT__STR(x) #x
#define KNIT__XSTR(x) KNIT__STR(x)

const char *knit_version(void) {
    return KNIT__XSTR(KNIT_VERSION_MAJOR) "." KNIT__XSTR(
        KNIT_VERSION_MINOR) "." KNIT__XSTR(KNIT_VERSION_PATCH);
}
