// SPDX-License-Identifier: GPL-2.0
/* mlf-nop: a dynamically linked program that does nothing (mlf-exec-cost). */
int main(void)
{
	return 0;
}
