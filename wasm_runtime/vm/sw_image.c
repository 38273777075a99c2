/* stub: being written */
#include "sw_lib.h"
