#ifndef EVENTLOG_CSQLITE_SHIM_H
#define EVENTLOG_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
