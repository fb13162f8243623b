/* A library planted in a compile cache (test/cli/cache-trust*.test): its
   constructor creates the file $MARK when the library is loaded, so a
   test sees whether eintup loaded it. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void mark(void) {
    const char *path = getenv("MARK");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f) fclose(f);
}
