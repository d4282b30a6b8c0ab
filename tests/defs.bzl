"""One GoogleTest binary per module: tests/<name>.cc."""

def knit_test(name, srcs = None, deps = [], size = "medium", **kwargs):
    native.cc_test(
        name = name,
        srcs = srcs or [name + ".cc", "test_util.h", "pool_util.h"],
        size = size,
        deps = ["//:knit_core", "//third_party:gtest_main"] + deps,
        **kwargs
    )
