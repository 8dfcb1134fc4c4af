/* SPDX-License-Identifier: MIT */
/* What the tools that draw through gnuplot share (mscclpp-perf --plot,
 * mscclpp-trace plot): finding it, and quoting a string for its scripts. */
#ifndef MSCCLPP_TOOLS_COMMON_GNUPLOT_H_
#define MSCCLPP_TOOLS_COMMON_GNUPLOT_H_

#include <stddef.h>
#include <stdio.h>

/* An executable `name` in PATH, into buf: 1 found, 0 not. */
int toolFindInPath(const char* name, char* buf, size_t len);
/* s as a gnuplot string literal: single quotes, doubled inside. */
void toolGnuplotQuoted(FILE* f, const char* s);

#endif /* MSCCLPP_TOOLS_COMMON_GNUPLOT_H_ */
