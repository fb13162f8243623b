/* Runs an eintup bundle through the C API (docs/c-api.md): opens a device,
 * loads the bundle once, fills every input with a pattern, runs it, and
 * prints every output (its first values and their sum).
 *
 *   cc docs/examples/c/run_bundle.c -I runtime/capi/include \
 *      -L target/debug -leintup_rt -Wl,-rpath,target/debug -o run_bundle
 *   ./run_bundle mm.etb          # on the emulator
 *   ./run_bundle mm.etb cuda     # on CUDA device 0
 *
 * Element k of every input is (k % 8) / 2 - 1 (floats) or k % 8 - 4 (i32).
 * On failure it prints `error: MESSAGE` and exits with the status (2: the
 * bundle or an input, 3: no CUDA driver, 70: the driver failed), as etrun.
 */
#include <stdio.h>
#include <stdlib.h>

#include "eintup.h"

/* Values printed per output before "...". */
#define SHOWN 8

static int fail(EtStatus status) {
    fprintf(stderr, "error: %s\n", et_last_error());
    return (int)status;
}

static const char *dtype_name(int32_t dtype) {
    switch (dtype) {
    case ET_DTYPE_I32: return "i32";
    case ET_DTYPE_F32: return "f32";
    default: return "f64";
    }
}

/* Element k of a buffer of `dtype`, as a double (exact for these types). */
static double element(const void *data, int32_t dtype, size_t k) {
    switch (dtype) {
    case ET_DTYPE_I32: return ((const int32_t *)data)[k];
    case ET_DTYPE_F32: return ((const float *)data)[k];
    default: return ((const double *)data)[k];
    }
}

static void fill(void *data, int32_t dtype, size_t count) {
    for (size_t k = 0; k < count; k++) {
        double v = (double)(k % 8) / 2 - 1;
        switch (dtype) {
        case ET_DTYPE_I32: ((int32_t *)data)[k] = (int32_t)(k % 8) - 4; break;
        case ET_DTYPE_F32: ((float *)data)[k] = (float)v; break;
        default: ((double *)data)[k] = v; break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s BUNDLE.etb [emu|cuda]\n", argv[0]);
        return 2;
    }
    EtDevice *dev = NULL;
    EtBundle *bundle = NULL;
    EtProgram *prog = NULL;
    EtStatus s = et_device_open(argc == 3 ? argv[2] : "emu", 0, &dev);
    if (s == ET_OK) s = et_bundle_load(argv[1], &bundle);
    if (s == ET_OK) s = et_program_load(dev, bundle, &prog);
    /* The program keeps what it needs: the handles can go at once. */
    et_bundle_free(bundle);
    if (s != ET_OK) {
        et_device_free(dev);
        return fail(s);
    }
    const char *device_name = NULL;
    et_device_name(dev, &device_name);
    printf("device: %s\n", device_name);
    et_device_free(dev);

    size_t count = 0;
    et_program_buffer_count(prog, &count);
    /* Two passes over the buffers: write the inputs, run, print the outputs. */
    for (int pass = 0; pass < 2 && s == ET_OK; pass++) {
        for (size_t i = 0; i < count && s == ET_OK; i++) {
            const char *name = NULL;
            int32_t role = 0, dtype = 0;
            size_t ndim = 0, bytes = 0;
            int64_t shape[16];
            s = et_program_buffer_name(prog, i, &name);
            if (s == ET_OK) s = et_program_buffer_info(prog, name, &role, &dtype, &ndim, shape, 16, &bytes);
            if (s != ET_OK || role != (pass == 0 ? ET_ROLE_INPUT : ET_ROLE_OUTPUT)) continue;
            size_t elements = bytes / (dtype == ET_DTYPE_F64 ? 8 : 4);
            void *data = malloc(bytes ? bytes : 1);
            if (data == NULL) {
                fprintf(stderr, "error: out of memory\n");
                et_program_free(prog);
                return 70;
            }
            if (pass == 0) {
                fill(data, dtype, elements);
                s = et_program_write(prog, name, dtype, ndim, shape, data, bytes);
            } else {
                s = et_program_read(prog, name, data, bytes);
                if (s == ET_OK) {
                    printf("%s %s [", name, dtype_name(dtype));
                    for (size_t d = 0; d < ndim; d++) printf(d ? ", %lld" : "%lld", (long long)shape[d]);
                    printf("]:");
                    double sum = 0;
                    for (size_t k = 0; k < elements; k++) {
                        double v = element(data, dtype, k);
                        sum += v;
                        if (k < SHOWN) printf(" %.17g", v);
                    }
                    printf("%s (sum %.17g)\n", elements > SHOWN ? " ..." : "", sum);
                }
            }
            free(data);
        }
        if (pass == 0 && s == ET_OK) s = et_program_run(prog);
    }
    if (s != ET_OK) {
        int code = fail(s);
        et_program_free(prog);
        return code;
    }
    et_program_free(prog);
    return 0;
}
