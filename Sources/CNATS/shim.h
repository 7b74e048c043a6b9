#ifndef EVENTLOG_CNATS_SHIM_H
#define EVENTLOG_CNATS_SHIM_H
#include <nats/nats.h>
#endif
