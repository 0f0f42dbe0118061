/* SPDX-License-Identifier: MIT */
/* sim.c: a test of one's own on the installed cluster simulator. */
#include <stdio.h>

#include <weft/sim.h>

int
main(void)
{
	weft_sim_opts o = {.nodes = 2, .seed = 1};
	weft_sim *sim;
	int rv;

	if ((rv = weft_sim_new(&o, &sim)) != 0) {
		fprintf(stderr, "weft_sim_new: %s\n", weft_strerror(rv));
		return 1;
	}
	if ((rv = weft_sim_stall(sim, 0, 1, true)) != 0 ||
	    (rv = weft_sim_drop(sim, 0, 1)) != 0) {
		fprintf(stderr, "faults: %s\n", weft_strerror(rv));
		return 1;
	}
	weft_sim_free(sim);
	printf("%s\n", weft_strerror(WEFT_EPROTO));
	return 0;
}
