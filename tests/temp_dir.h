/*
 * temp_dir.h - a test's own directory under /tmp (the log's tests: the
 * stores', the engine's contract suite, the simulation), removed with
 * the files in it.
 *
 * Threading: the test's thread; nothing else uses the directory then.
 */
#ifndef TALLY_TEST_TEMP_DIR_H
#define TALLY_TEST_TEMP_DIR_H

/* Removes dir and the files in it (one level: the log's files; no
 * subdirectories). Whatever is missing is not an error. */
void temp_dir_remove(const char *dir);

#endif
