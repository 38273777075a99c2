/* stub: being written */
#include "sw_lib.h"
sw_status_t sw_text_equal(SW_LIB_ARGS) { (void)t; (void)scalars; (void)detail; (void)cancel; (void)params; (void)blob; return SW_INTERNAL; }
