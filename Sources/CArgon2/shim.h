#ifndef VAULTLOG_CARGON2_SHIM_H
#define VAULTLOG_CARGON2_SHIM_H
#include <argon2.h>
#endif
