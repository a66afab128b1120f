// libdw (elfutils) through koffi: the symbol tables and DWARF types of ELF files.
// A Dwarf_Die is a 32-byte struct {void *addr; void *cu; void *abbrev; long padding} that we
// only ever hold in native buffers we own (koffi trap 1, README.md: keep what C points to alive).
import koffi from 'koffi';
import { ownedAlloc, permanentAlloc } from './alloc.js';
import { dlopen, dlsymAddress, RTLD_NOW } from './libc.js';

const libdw = koffi.load('libdw.so.1');

export const DIE_SIZE = 32;
export const GELF_SYM_SIZE = 24;

export const dw = {
  dwfl_begin: libdw.func('void *dwfl_begin(void *callbacks)'),
  dwfl_end: libdw.func('void dwfl_end(void *dwfl)'),
  dwfl_report_begin: libdw.func('void dwfl_report_begin(void *dwfl)'),
  dwfl_report_elf: libdw.func(
    'void *dwfl_report_elf(void *dwfl, const char *name, const char *file, int fd, uint64_t base, bool add_p_vaddr)',
  ),
  dwfl_report_end: libdw.func('int dwfl_report_end(void *dwfl, void *removed, void *arg)'),
  dwfl_errno: libdw.func('int dwfl_errno()'),
  dwfl_errmsg: libdw.func('const char *dwfl_errmsg(int err)'),
  dwfl_module_build_id: libdw.func(
    'int dwfl_module_build_id(void *mod, _Out_ void **bits, _Out_ uint64_t *vaddr)',
  ),
  dwfl_module_getsymtab: libdw.func('int dwfl_module_getsymtab(void *mod)'),
  dwfl_module_getsym_info: libdw.func(
    'const char *dwfl_module_getsym_info(void *mod, int ndx, void *sym, void *addr, void *shndx, void *elfp, void *bias)',
  ),
  dwfl_module_getdwarf: libdw.func('void *dwfl_module_getdwarf(void *mod, void *bias)'),
  dwfl_module_info: libdw.func(
    'const char *dwfl_module_info(void *mod, void *userdata, void *start, void *end, void *dwbias, void *symbias, _Out_ const char **mainfile, _Out_ const char **debugfile)',
  ),
  dwarf_getalt: libdw.func('void *dwarf_getalt(void *dwarf)'),
  dwarf_nextcu: libdw.func(
    'int dwarf_nextcu(void *dwarf, uint64_t off, _Out_ uint64_t *next_off, _Out_ size_t *header_size, void *abbrev_off, void *addr_size, void *off_size)',
  ),
  dwarf_offdie: libdw.func('void *dwarf_offdie(void *dwarf, uint64_t off, void *result)'),
  dwarf_child: libdw.func('int dwarf_child(void *die, void *result)'),
  dwarf_siblingof: libdw.func('int dwarf_siblingof(void *die, void *result)'),
  dwarf_tag: libdw.func('int dwarf_tag(void *die)'),
  dwarf_diename: libdw.func('const char *dwarf_diename(void *die)'),
  dwarf_hasattr: libdw.func('int dwarf_hasattr(void *die, unsigned int name)'),
  dwarf_bytesize: libdw.func('int dwarf_bytesize(void *die)'),
  dwarf_peel_type: libdw.func('int dwarf_peel_type(void *die, void *result)'),
  dwarf_attr: libdw.func('void *dwarf_attr(void *die, unsigned int name, void *result)'),
  dwarf_formudata: libdw.func('int dwarf_formudata(void *attr, _Out_ uint64_t *value)'),
  dwarf_formref_die: libdw.func('void *dwarf_formref_die(void *attr, void *result)'),
  dwarf_dieoffset: libdw.func('uint64_t dwarf_dieoffset(void *die)'),
  dwarf_cu_getdwarf: libdw.func('void *dwarf_cu_getdwarf(void *cu)'),
  dwarf_diecu: libdw.func(
    'void *dwarf_diecu(void *die, void *result, void *address_size, void *offset_size)',
  ),
  dwarf_addrdie: libdw.func('void *dwarf_addrdie(void *dwarf, uint64_t addr, void *result)'),
  // ---- live processes: unwinding and symbolisation (inferior/unwind.ts) ----
  dwfl_linux_proc_report: libdw.func('int dwfl_linux_proc_report(void *dwfl, int pid)'),
  dwfl_linux_proc_attach: libdw.func(
    'int dwfl_linux_proc_attach(void *dwfl, int pid, bool assume_ptrace_stopped)',
  ),
  dwfl_getthread_frames: libdw.func(
    'int dwfl_getthread_frames(void *dwfl, int tid, void *callback, void *arg)',
  ),
  dwfl_frame_pc: libdw.func('bool dwfl_frame_pc(void *frame, void *pc, void *isactivation)'),
  dwfl_frame_reg: libdw.func('int dwfl_frame_reg(void *frame, unsigned int regno, void *val)'),
  dwfl_addrmodule: libdw.func('void *dwfl_addrmodule(void *dwfl, uint64_t addr)'),
  dwfl_module_addrinfo: libdw.func(
    'const char *dwfl_module_addrinfo(void *mod, uint64_t addr, void *offset, void *sym, void *shndx, void *elfp, void *bias)',
  ),
  dwfl_module_getsrc: libdw.func('void *dwfl_module_getsrc(void *mod, uint64_t addr)'),
  dwfl_lineinfo: libdw.func(
    'const char *dwfl_lineinfo(void *line, void *addr, void *linep, void *colp, void *mtime, void *length)',
  ),
  dwfl_module_addrdie: libdw.func('void *dwfl_module_addrdie(void *mod, uint64_t addr, void *bias)'),
  dwarf_getsrclines: libdw.func(
    'int dwarf_getsrclines(void *cudie, _Out_ void **lines, _Out_ size_t *nlines)',
  ),
  dwarf_onesrcline: libdw.func('void *dwarf_onesrcline(void *lines, size_t idx)'),
  dwarf_lineaddr: libdw.func('int dwarf_lineaddr(void *line, _Out_ uint64_t *addrp)'),
  dwarf_linebeginstatement: libdw.func('int dwarf_linebeginstatement(void *line, _Out_ bool *flagp)'),
  dwarf_lineendsequence: libdw.func('int dwarf_lineendsequence(void *line, _Out_ bool *flagp)'),
  dwarf_lineno: libdw.func('int dwarf_lineno(void *line, _Out_ int *linep)'),
  dwarf_linesrc: libdw.func('const char *dwarf_linesrc(void *line, void *mtime, void *length)'),
  dwarf_getscopes: libdw.func('int dwarf_getscopes(void *cudie, uint64_t pc, void *scopes)'),
  dwarf_attr_integrate: libdw.func('void *dwarf_attr_integrate(void *die, unsigned int name, void *result)'),
  dwarf_formstring: libdw.func('const char *dwarf_formstring(void *attr)'),
  dwarf_formsdata: libdw.func('int dwarf_formsdata(void *attr, void *value)'),
  dwarf_getsrcfiles: libdw.func('int dwarf_getsrcfiles(void *cudie, void *files, void *nfiles)'),
  dwarf_filesrc: libdw.func('const char *dwarf_filesrc(void *files, size_t idx, void *mtime, void *length)'),
  dwarf_getlocation_addr: libdw.func(
    'int dwarf_getlocation_addr(void *attr, uint64_t address, void *exprs, void *exprlens, size_t nlocs)',
  ),
  dwarf_getlocation: libdw.func('int dwarf_getlocation(void *attr, void *expr, void *exprlen)'),
  dwarf_lowpc: libdw.func('int dwarf_lowpc(void *die, void *addr)'),
  // ---- core files: modules and threads from an ET_CORE (inferior/unwind.ts unwindCore) ----
  dwfl_core_file_report: libdw.func(
    'int dwfl_core_file_report(void *dwfl, void *elf, const char *executable)',
  ),
  dwfl_core_file_attach: libdw.func('int dwfl_core_file_attach(void *dwfl, void *elf)'),
  dwfl_pid: libdw.func('int dwfl_pid(void *dwfl)'),
  dwfl_getthreads: libdw.func('int dwfl_getthreads(void *dwfl, void *callback, void *arg)'),
  dwfl_thread_tid: libdw.func('int dwfl_thread_tid(void *thread)'),
  dwfl_module_getelf: libdw.func('void *dwfl_module_getelf(void *mod, void *bias)'),
};

// libelf (the same libelf.so.1 libdw is linked against: an Elf * from here is libdw's Elf *).
const libelf = koffi.load('libelf.so.1');

export const EV_CURRENT = 1;
/** Elf_Cmd: read, mmap the file if possible. */
export const ELF_C_READ_MMAP = 8;
/** Elf_Kind of an ELF file (not an archive). */
export const ELF_K_ELF = 3;
export const ET_CORE = 4;
export const EM_X86_64 = 62;

export const elf = {
  elf_version: libelf.func('unsigned int elf_version(unsigned int version)'),
  elf_begin: libelf.func('void *elf_begin(int fd, int cmd, void *ref)'),
  elf_end: libelf.func('int elf_end(void *elf)'),
  elf_kind: libelf.func('int elf_kind(void *elf)'),
  /** Elf64_Ehdr *: e_type (uint16) at offset 16, e_machine (uint16) at 18. */
  elf64_getehdr: libelf.func('void *elf64_getehdr(void *elf)'),
  elf_errmsg: libelf.func('const char *elf_errmsg(int err)'),
};

export function elfError(): string {
  return (elf.elf_errmsg(-1) as string | null) ?? 'unknown libelf error';
}

/**
 * A Dwfl_Callbacks block {find_elf, find_debuginfo, section_address, debuginfo_path}, owned for
 * the life of the process. koffi loads libraries RTLD_LOCAL: the callbacks' addresses come from
 * our own dlopen handle. `sectionAddress` null leaves that slot empty (live processes).
 */
function dwflCallbacks(
  findElf: string,
  sectionAddress: string | null,
  debuginfoPath: string | null,
): unknown {
  const opened = dlopen('libdw.so.1', RTLD_NOW);
  if (!('handle' in opened)) throw new Error(`dlopen libdw.so.1: ${opened.error}`);
  const cb = permanentAlloc('uintptr_t', 4);
  const view = new BigUint64Array(koffi.view(cb, 32));
  view[0] = dlsymAddress(opened.handle, findElf);
  view[1] = dlsymAddress(opened.handle, 'dwfl_standard_find_debuginfo');
  view[2] = sectionAddress === null ? 0n : dlsymAddress(opened.handle, sectionAddress);
  view[3] = 0n;
  if (view[0] === 0n || view[1] === 0n || (sectionAddress !== null && view[2] === 0n)) {
    throw new Error(
      `libdw.so.1 is loaded but ${findElf} and the other dwfl_* callbacks are not visible through dlsym`,
    );
  }
  if (debuginfoPath !== null) {
    // debuginfo_path is a char ** that libdw reads for the life of the Dwfl.
    const n = Buffer.byteLength(debuginfoPath) + 1;
    const str = permanentAlloc('char', n);
    koffi.encode(str, 'char', debuginfoPath, n);
    const holder = permanentAlloc('uintptr_t', 1);
    new BigUint64Array(koffi.view(holder, 8))[0] = BigInt(koffi.address(str));
    view[3] = BigInt(koffi.address(holder));
    keepAlive.push(str, holder);
  }
  keepAlive.push(cb);
  return cb;
}

/** Dwfl_Callbacks for a live process (find_elf through /proc). */
export function procCallbacks(debuginfoPath: string | null): unknown {
  return dwflCallbacks('dwfl_linux_proc_find_elf', null, debuginfoPath);
}

/**
 * Dwfl_Callbacks for a core file: modules found by build-id (the debuginfo path's .build-id
 * trees, else the file the core names if its build-id matches), as eu-stack --core does.
 */
export function coreCallbacks(debuginfoPath: string | null): unknown {
  return dwflCallbacks('dwfl_build_id_find_elf', null, debuginfoPath);
}

/** The thread callback of dwfl_getthreads: int (*)(Dwfl_Thread *, void *). */
export const ThreadCallback = koffi.proto('int mqd_dwfl_thread_cb(void *thread, void *arg)');

/** The frame callback of dwfl_getthread_frames: int (*)(Dwfl_Frame *, void *). */
export const FrameCallback = koffi.proto('int mqd_dwfl_frame_cb(void *frame, void *arg)');
/** Size of a Dwarf_Op {uint8_t atom; Dwarf_Word number, number2, offset}. */
export const DWARF_OP_SIZE = 32;

export const DW_TAG = {
  class_type: 0x02,
  enumeration_type: 0x04,
  member: 0x0d,
  pointer_type: 0x0f,
  compile_unit: 0x11,
  structure_type: 0x13,
  typedef: 0x16,
  union_type: 0x17,
  base_type: 0x24,
  partial_unit: 0x3c,
  imported_unit: 0x3d,
  formal_parameter: 0x05,
  inlined_subroutine: 0x1d,
  subprogram: 0x2e,
} as const;
export const DW_AT = {
  name: 0x03,
  location: 0x02,
  frame_base: 0x40,
  call_file: 0x58,
  call_line: 0x59,
  linkage_name: 0x6e,
  MIPS_linkage_name: 0x2007,
  declaration: 0x3c,
  data_member_location: 0x38,
  type: 0x49,
} as const;

export function dwflError(): string {
  return (dw.dwfl_errmsg(-1) as string | null) ?? 'unknown libdw error';
}

/** Dwfl_Callbacks for offline files (found by build-id, sections at their file addresses). */
export function offlineCallbacks(debuginfoPath: string | null): unknown {
  return dwflCallbacks('dwfl_build_id_find_elf', 'dwfl_offline_section_address', debuginfoPath);
}

/** Native blocks that C keeps pointers to; never released (a handful per process). */
const keepAlive: unknown[] = [];

/** A Dwarf_Die block owned by the caller: free it with nativeFree (native/alloc.ts). */
export function allocDie(): unknown {
  return ownedAlloc('uint8_t', DIE_SIZE);
}

/** Scratch bytes owned by the caller: free them with nativeFree (native/alloc.ts). */
export function alloc(bytes: number): unknown {
  return ownedAlloc('uint8_t', bytes);
}

export function u64(ptr: unknown): bigint {
  return new BigUint64Array(koffi.view(ptr, 8))[0] ?? 0n;
}

export function decodeBytes(ptr: unknown, len: number): Uint8Array {
  return new Uint8Array(koffi.decode(ptr, koffi.array('uint8_t', len)) as number[]);
}
