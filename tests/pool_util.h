// A pool for the length of a test: created with the given shape, drained and
// destroyed (checked) at the end, unless release() handed it over.
#pragma once

#include <gtest/gtest.h>

#include "knit/knit.h"

namespace knit_test {

struct Pool {
    knit_pool *p = nullptr;
    explicit Pool(unsigned threads, const char *sched = nullptr, size_t max_pending = 0,
                  int backpressure = KNIT_BLOCK) {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = threads;
        o.sched = sched;
        o.max_pending = max_pending;
        o.backpressure = backpressure;
        EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    }
    ~Pool() {
        if (p) {
            EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN)) << knit_last_error();
        }
    }
    // Hands the pool over to a test that destroys it itself.
    knit_pool *release() {
        knit_pool *q = p;
        p = nullptr;
        return q;
    }
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;
    operator knit_pool *() const { return p; }
};

}  // namespace knit_test
