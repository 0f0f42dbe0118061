/* SPDX-License-Identifier: MIT */
/*
 * standalone.c: a main() for fuzz targets built without libFuzzer. It runs
 * LLVMFuzzerTestOneInput once on each file named on the command line, and
 * on each file of each directory named, so that ctest replays the seed
 * corpus in every build. Returns 0 when every input ran.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL;
	long size;

	if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 ||
	    (size = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0)
		goto err;
	/* Exactly the file's size, as libFuzzer gives it, so that a read
	 * past the end shows under ASan (an empty file may give NULL). */
	if (((buf = malloc((size_t)size)) == NULL && size > 0) ||
	    fread(buf, 1, (size_t)size, fp) != (size_t)size)
		goto err;
	fclose(fp);
	LLVMFuzzerTestOneInput(buf, (size_t)size);
	free(buf);
	return 0;

err:
	fprintf(stderr, "cannot read %s\n", path);
	free(buf);
	if (fp != NULL)
		fclose(fp);
	return -1;
}

static int
run_dir(const char *path, int *count)
{
	struct dirent *e;
	char file[4096];
	DIR *d = opendir(path);
	int rv = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
		if (run_file(file) != 0)
			rv = -1;
		(*count)++;
	}
	closedir(d);
	return rv;
}

int
main(int argc, char **argv)
{
	struct stat st;
	int i, count = 0, rv = 0;

	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "no such input: %s\n", argv[i]);
			rv = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) != 0)
				rv = 1;
		} else {
			if (run_file(argv[i]) != 0)
				rv = 1;
			count++;
		}
	}
	printf("%d input(s) run\n", count);
	return count == 0 ? 1 : rv;
}
