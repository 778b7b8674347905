/* libFuzzer target: the bootstrap message parser must reject any malformed input without
 * crashing, reading out of bounds or leaking (built with clang, -fsanitize=fuzzer,address). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../src/core/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  symcoll__boot_hdr_t h;
  if (symcoll__boot_hdr_parse(data, size, &h) != SYMCOLL_OK) return 0;
  /* A header that parses promises exactly h.len payload bytes after it. */
  if (sizeof h + h.len != size) __builtin_trap();
  symcoll__boot_hello_t hello;
  if (symcoll__boot_hello_parse(&h, data + sizeof h, &hello) == SYMCOLL_OK &&
      (hello.rank < 0 || hello.rank >= hello.nranks || hello.nranks > SYMCOLL_MAX_RANKS))
    __builtin_trap();
  return 0;
}
