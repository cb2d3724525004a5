/* SPDX-License-Identifier: GPL-2.0 */
/* Routing of the mlock-family system calls (route.c). */
#ifndef MLOCKFAST_ROUTE_H
#define MLOCKFAST_ROUTE_H

#include <linux/mlockfast.h>

/* After the device is registered (route=group reads its node's group). */
int mlf_route_init(void);
/* Before the per-mm state goes: routed calls use it. */
void mlf_route_exit(void);
/* MLOCKFAST_IOC_ROUTE */
long mlf_route_ioctl(struct mlockfast_route __user *u);
/* Gauges for the stats: processes with a choice, forks that lost one. */
unsigned long mlf_route_procs_tracked(void);
unsigned long mlf_route_inherit_failures(void);

#endif /* MLOCKFAST_ROUTE_H */
