#include "CFuzzerDriver.h"

// Both provided at link time: the first by the fuzz target (`@_cdecl`), the second by
// libFuzzer (linked by `-sanitize=fuzzer`).
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

int vaultlog_fuzz_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
