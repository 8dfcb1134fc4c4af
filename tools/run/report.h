/* SPDX-License-Identifier: MIT */
/*
 * mscclpp-run --report: the ranks' hang reports (src/core/report.h's
 * format), read from their output, and the diagnosis printed from them.
 * The launcher feeds every line a rank writes; this part keeps, per rank,
 * the last state of each communicator it reported, and compares the ranks
 * of each communicator.
 */
#ifndef MSCCLPP_TOOLS_RUN_REPORT_H_
#define MSCCLPP_TOOLS_RUN_REPORT_H_

#include <stddef.h>
#include <stdio.h>

struct runReports;

/* For nranks launcher ranks; NULL when out of memory. */
struct runReports* runReportsCreate(int nranks);
void runReportsDestroy(struct runReports* rr);

/* A line (without its newline) that rank `rank` wrote. Returns 0 for a line
 * that is not a report's, 1 for a report line, 2 for the first line of a
 * report written because a wait of the rank failed (timeout or error: the
 * launcher then asks every rank for its report), 3 for the last line. */
int runReportsLine(struct runReports* rr, int rank, const char* line, size_t len);

/* A new round: forget which ranks answered. */
void runReportsAsk(struct runReports* rr);
/* Rank `rank` was asked (it catches SIGUSR1) and has not answered yet. */
void runReportsExpect(struct runReports* rr, int rank);
/* 1 when every rank expected in this round has answered. */
int runReportsAnswered(const struct runReports* rr);
/* 1 when some report was read since the last diagnosis. */
int runReportsFresh(const struct runReports* rr);

/* Print the diagnosis of every communicator reported, lines starting with
 * `prefix`, to f. */
void runReportsDiagnose(struct runReports* rr, FILE* f, const char* prefix);

#endif /* MSCCLPP_TOOLS_RUN_REPORT_H_ */
