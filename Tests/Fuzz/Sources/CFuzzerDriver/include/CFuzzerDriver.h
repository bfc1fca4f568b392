#ifndef VAULTLOG_CFUZZERDRIVER_H
#define VAULTLOG_CFUZZERDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer (its command line in argc/argv) on the target's `LLVMFuzzerTestOneInput`,
/// as libFuzzer's own `main` would; returns the process exit code.
int vaultlog_fuzz_main(int argc, char **argv);

#endif
