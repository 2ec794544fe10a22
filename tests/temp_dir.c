/*
 * temp_dir.c - a test's own directory, removed (temp_dir.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "temp_dir.h"

void temp_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *x;
    while (d != NULL && (x = readdir(d)) != NULL) {
        if (x->d_name[0] == '.')
            continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, x->d_name);
        unlink(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}
