// fedpriv's version, recorded in every result and cell (and in each cell's identity
// hash, so a new version never reuses an older version's cells), and the source tree it
// was built from (`git describe` at build time; "unknown" outside a git checkout).
#ifndef FEDPRIV_CORE_VERSION_H
#define FEDPRIV_CORE_VERSION_H

#define FEDPRIV_VERSION "0.2.0"

// `git describe --always --dirty` of the tree this binary was built from, or "unknown".
const char *fedpriv_build_describe(void);

#endif
