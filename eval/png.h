// The PNG codec moved to core/png.h (datasets/imagefolder.c reads PNG images, and
// datasets sit beside eval, not above it). This header keeps eval's includes working.
#ifndef FEDPRIV_EVAL_PNG_H
#define FEDPRIV_EVAL_PNG_H

#include "core/png.h"

#endif
