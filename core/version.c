// The build's source description: the Makefile regenerates version_describe.h only when
// `git describe` changes, so this one file recompiles and nothing else does.
#include "core/version.h"

#include "version_describe.h"

const char *fedpriv_build_describe(void) { return FEDPRIV_BUILD_DESCRIBE; }
