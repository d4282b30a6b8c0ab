/* Includes a knit-internal header through @knit//:knit: must fail to build. */
#include <knit/knit.h>

#include "runtime/pool.h"

int main(void) { return (int)sizeof(struct knit__pool); }
