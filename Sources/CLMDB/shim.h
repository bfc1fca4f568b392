#ifndef VAULTLOG_CLMDB_SHIM_H
#define VAULTLOG_CLMDB_SHIM_H
#include <lmdb.h>

/* Starts loading the cache line at `address` (a value in the map that is read soon) without
   waiting for it: a fold opens events one after another, and the first read of each event's
   header otherwise waits for memory. Never faults; a no-op where the compiler has no prefetch. */
static inline void vaultlog_prefetch(const void *address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address, 0, 3);
#else
    (void)address;
#endif
}
#endif
