/* String constants (sw_lib.h, sw_text_unpack): the weights hold each element as an offset
 * into the constant's own packed bytes, since a data segment cannot hold the addresses the
 * elements need; this makes them addresses, checking each against the packed length. */
#include "sw_lib.h"

sw_status_t sw_text_unpack(SW_LIB_ARGS) {
  (void)scalars, (void)detail, (void)cancel, (void)params, (void)blob;
  const sw_tensor* packed = t[0];
  sw_tensor* out = t[1];
  int64_t n = 1, size = packed->shape[0];
  for (int32_t i = 0; i < out->rank; i++) n *= out->shape[i];
  if (n > size / (int64_t)sizeof(sw_str)) return SW_INTERNAL;
  const uint8_t* base = (const uint8_t*)packed->data;
  const sw_str* in = (const sw_str*)packed->data;
  sw_str* dst = (sw_str*)out->data;
  for (int64_t i = 0; i < n; i++) {
    int64_t off = in[i].ptr, len = in[i].len;
    if (off < 0 || len < 0 || off > size || len > size - off) return SW_INTERNAL;
    dst[i] = sw_str_make(base + off, len);
  }
  return SW_OK;
}
