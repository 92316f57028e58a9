/*
 * server — `headstart serve`: HTTP with libmicrohttpd (only server/http.c touches it),
 * routes, auth, limits, SSE streaming, and the scheduler: one engine thread owning the
 * model and all sequences, a bounded FIFO queue, the bank between requests.
 *
 * Design note (contract; DESIGN.md §6):
 *   1. HTTP callbacks never block; streaming uses suspend/resume.
 *   2. Bad input gets an error in the API's own shape, never a crash.
 *
 * Status: not yet written (issue [F6]).
 */
#ifndef HS_SERVER_H
#define HS_SERVER_H
#include "base/base.h"
#endif
