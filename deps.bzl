"""The repositories knit needs, for a workspace that uses @knit (issue 17).

In the user's WORKSPACE:

    local_repository(name = "knit", path = "/path/to/knit")   # or http_archive
    load("@knit//:deps.bzl", "knit_dependencies")
    knit_dependencies()

Declares, unless the workspace already declared it (same name):
  - rules_cc: knit's shim re-exporting Bazel's native cc_* rules (Debian's
    bazel-rules-cc does not load with Bazel 4.2.3, and @bazel_tools loads
    these names from @rules_cc);
  - rules_java: Debian's bazel-rules-java, /usr/share/bazel/rules/java;
  - remote_coverage_tools: empty stand-ins that `bazel test` references
    even with coverage off.
So an offline Bazel (--experimental_repository_disable_download) fetches
nothing. jemalloc and concurrencykit come from the system (Debian:
libjemalloc-dev, libck-dev), as for knit itself.
"""

def _knit_shim_impl(rctx):
    # A directory of knit's own tree, found from this file's label: so the
    # user's path to knit (and their name for it) does not matter.
    src = rctx.path(Label("//:deps.bzl")).dirname
    for part in rctx.attr.dir.split("/"):
        src = src.get_child(part)
    if not src.exists:
        fail("knit_dependencies: %s is missing from knit's tree" % src)
    for child in src.readdir():
        rctx.symlink(child, child.basename)

_knit_shim = repository_rule(
    implementation = _knit_shim_impl,
    attrs = {"dir": attr.string(mandatory = True)},
    local = True,
)

def knit_dependencies():
    """Declares every repository knit needs that is not declared yet."""
    if not native.existing_rule("rules_cc"):
        _knit_shim(name = "rules_cc", dir = "third_party/rules_cc")
    if not native.existing_rule("rules_java"):
        native.local_repository(
            name = "rules_java",
            path = "/usr/share/bazel/rules/java",
        )
    if not native.existing_rule("remote_coverage_tools"):
        _knit_shim(
            name = "remote_coverage_tools",
            dir = "third_party/remote_coverage_tools",
        )
