/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Generated from supported-kernels by test/kernel-table: do not edit.  The
 * kernel releases the module loads on ('#': one or more digits), exactly
 * those dkms.conf builds for; compat.c declines any other at load.
 */
#ifndef MLOCKFAST_SUPPORTED_H
#define MLOCKFAST_SUPPORTED_H

static const char *const mlf_supported_releases[] = {
	"6.1.0-#-amd64",	/* 6.1 generic, bookworm */
	"6.1.0-#-cloud-amd64",	/* 6.1 cloud, bookworm */
	"6.1.0-#-rt-amd64",	/* 6.1 rt, bookworm */
	"6.12.#+deb12-amd64",	/* 6.12 generic, bookworm */
	"6.12.#+deb12-cloud-amd64",	/* 6.12 cloud, bookworm */
	"6.12.#+deb12-rt-amd64",	/* 6.12 rt, bookworm */
	"6.12.#+deb13-amd64",	/* 6.12 generic, trixie */
	"6.12.#+deb13-cloud-amd64",	/* 6.12 cloud, trixie */
	"6.12.#+deb13-rt-amd64",	/* 6.12 rt, trixie */
	"7.2.#+deb14-amd64",	/* 7.2 generic, sid */
	"7.3.#+deb13-amd64",	/* 7.3 generic, trixie-backports */
	"7.3.#+deb13-cloud-amd64",	/* 7.3 cloud, trixie-backports */
	"7.3.#+deb13-rt-amd64",	/* 7.3 rt, trixie-backports */
};

#endif
