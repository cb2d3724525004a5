// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin for test/vm/profile: how often each translation block
 * ran.  At exit it writes "start_address instructions executions" lines to
 * the file named by its out= argument.  Only the few plugin API calls used
 * here are declared (QEMU plugin API version 1, as in QEMU 7.2).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct {
	const char *target_name;
	struct { int min, cur; } version;
	bool system_emulation;
} qemu_info_t;
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id,
					       struct qemu_plugin_tb *tb);
enum { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
					      int op, void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
				    qemu_plugin_udata_cb_t cb, void *userdata);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One per (start, length): a block translated again reuses its counter. */
struct block {
	uint64_t vaddr, insns, execs;
	struct block *next;
};

#define HASH_BITS	20
static struct block *table[1u << HASH_BITS];
static const char *out_path = "tbprof.out";

static struct block *block_of(uint64_t vaddr, uint64_t insns)
{
	unsigned int h = (unsigned int)((vaddr * 0x9E3779B97F4A7C15ull) >>
					(64 - HASH_BITS));
	struct block *b;

	for (b = table[h]; b; b = b->next)
		if (b->vaddr == vaddr && b->insns == insns)
			return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	b->vaddr = vaddr;
	b->insns = insns;
	b->next = table[h];
	table[h] = b;
	return b;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = block_of(qemu_plugin_tb_vaddr(tb),
				   qemu_plugin_tb_n_insns(tb));

	(void)id;
	/* An add in the generated code: no callback per execution. */
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &b->execs, 1);
}

static void dump_counts(qemu_plugin_id_t id, void *userdata)
{
	FILE *f = fopen(out_path, "w");

	(void)id;
	(void)userdata;
	if (!f)
		return;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		for (struct block *b = table[i]; b; b = b->next)
			if (b->execs)
				fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
					b->vaddr, b->insns, b->execs);
	fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
			int argc, char **argv)
{
	(void)info;
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_path = argv[i] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, dump_counts, NULL);
	return 0;
}
