#ifndef VAULTLOG_CLMDB_SHIM_H
#define VAULTLOG_CLMDB_SHIM_H
#include <lmdb.h>
#endif
