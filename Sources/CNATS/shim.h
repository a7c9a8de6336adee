#ifndef CNATS_SHIM_H
#define CNATS_SHIM_H
#include <nats/nats.h>
#endif
