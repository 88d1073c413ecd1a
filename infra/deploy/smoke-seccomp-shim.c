/* For infra/deploy/smoke only, never shipped: QEMU's user-mode emulation implements no
 * seccomp for the programs it runs, so the parsers' worker, which refuses to read a file
 * unless its filter is installed, could not run under emulation at all. Preloaded in the
 * smoke's own root (/etc/ld.so.preload), this answers the worker's one seccomp(2) call as
 * done and passes every other system call through, so the parsers themselves run on arm64.
 * The filter is proven where a kernel enforces it: shared/isolate/tests/workers.rs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/syscall.h>

typedef long (*syscall_fn)(long, ...);

long syscall(long number, ...) {
    va_list args;
    va_start(args, number);
    long a = va_arg(args, long), b = va_arg(args, long), c = va_arg(args, long);
    long d = va_arg(args, long), e = va_arg(args, long), f = va_arg(args, long);
    va_end(args);
    if (number == SYS_seccomp) return 0;
    static syscall_fn real;
    if (!real) real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
    return real(number, a, b, c, d, e, f);
}
