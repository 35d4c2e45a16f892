# The JSONata transforms' dependencies (QUEUEBOX_WITH_TRANSFORMS): SpiderMonkey 102 from Debian
# (libmozjs-102-dev) to run the engine, and Node + npm at build time to fetch the pinned npm
# `jsonata` package, rewrite it (src/transform/tools/make_sync.js) and run the differential test.
pkg_check_modules(MOZJS REQUIRED IMPORTED_TARGET mozjs-102)
find_program(QB_NODE NAMES node nodejs REQUIRED)
find_program(QB_NPM npm REQUIRED)
