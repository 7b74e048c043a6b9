#ifndef EVENTLOG_CLMDB_SHIM_H
#define EVENTLOG_CLMDB_SHIM_H
#include <lmdb.h>
#endif
