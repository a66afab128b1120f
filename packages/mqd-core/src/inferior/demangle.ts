// C++ names of frames and DWARF functions, demangled through libstdc++'s own __cxa_demangle
// (loaded on first use; without libstdc++ mangled names stay mangled).
import koffi from 'koffi';

const cFree = koffi.load('libc.so.6').func('void free(void *ptr)');
let demangler: ((name: string) => string | null) | null | undefined;

/** C++ names through libstdc++'s own __cxa_demangle; the result is malloc'd and freed here. */
export function demangle(name: string): string {
  if (!name.startsWith('_Z')) return name;
  if (demangler === undefined) {
    try {
      const cxx = koffi.load('libstdc++.so.6');
      const fn = cxx.func(
        'void *__cxa_demangle(const char *mangled, void *buf, void *len, _Out_ int *status)',
      );
      demangler = (n: string) => {
        const status = [0];
        const p = fn(n, null, null, status);
        if (!p) return null;
        try {
          return status[0] === 0 ? (koffi.decode(p, 'char', -1) as string) : null;
        } finally {
          cFree(p);
        }
      };
    } catch {
      demangler = null; // no libstdc++ here: mangled names stay mangled
    }
  }
  return demangler?.(name) ?? name;
}
