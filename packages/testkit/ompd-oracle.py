# The testkit's OMPD oracle (hybrid.ts ompdOracle): run inside Debian's gdb attached to a rank
# (gdb -batch -p PID -x ompd-oracle.py). It loads LLVM's gdb OMPD plugin (path in
# $MQD_OMPD_PLUGIN), lets it find and initialise the runtime's libompd.so, then asks libompd,
# through the plugin's ompdModule, about every thread of the process by its OS thread id.
# The plugin's own `ompd threads` only knows threads it saw start, so it cannot serve a process
# attached late. Output, one record a line (everything else is gdb's or the plugin's chatter):
#   MQD_OMPD_THREAD {"tid":..,"threadNum":..,"state":..,"waitId":"0x..","function":..,
#                    "level":..,"teamSize":..,"taskKind":"implicit"|"explicit"|null}
#   MQD_OMPD_NOTE <text>                    (why something could not be read)
#   MQD_OMPD_DONE
# gdb -batch detaches when the script ends, also after an error.
import json
import os
import sys
import traceback

import gdb


def note(text):
    print("MQD_OMPD_NOTE " + " | ".join(str(text).splitlines()), flush=True)


def as_int(value):
    # ompdModule returns None, or an error code where a capsule was expected, on failure.
    return value if isinstance(value, int) else None


def capsule_or_none(value):
    return None if value is None or isinstance(value, int) else value


def function_name(addr):
    if not addr:
        return None
    block = gdb.block_for_pc(addr)
    while block is not None and block.function is None:
        block = block.superblock
    if block is not None:
        return block.function.print_name
    sym = gdb.execute("info symbol %d" % addr, to_string=True).split(" in section")[0]
    return None if sym.startswith("No symbol") else sym.split(" + ")[0].strip()


def main():
    plugin = os.environ["MQD_OMPD_PLUGIN"]
    sys.path.append(os.path.dirname(plugin))
    import ompd  # noqa: E402  the plugin: registers the `ompd ...` commands
    import ompd_callbacks  # noqa: E402
    import ompdModule  # noqa: E402

    # The plugin prints libompd's messages with gdb's printf, which fails on any '"' in them
    # (and then hides the call's result behind a SystemError): print them as notes instead.
    ompd_callbacks._print = lambda *args: note("libompd: %s" % (args[0] if args else ""))

    ompd.main()
    # `ompd init` would resume the process to wait for the runtime to start: refuse instead.
    try:
        locations = int(gdb.parse_and_eval("(long)ompd_dll_locations"))
    except gdb.error as e:
        note("no ompd_dll_locations (no OMPD-enabled OpenMP runtime in the process): %s" % e)
        return
    if locations == 0:
        note("ompd_dll_locations is NULL: the OpenMP runtime has not started yet")
        return
    gdb.execute("ompd init")
    space = ompd.addr_space
    if space is None:
        note("ompd init did not initialise an address space (no OMPD-enabled OpenMP runtime?)")
        return
    space.enumerate_states()
    space.get_icv_map()
    icvs = space.icv_map

    def icv(handle, name):
        if handle is None or name not in icvs:
            return None
        ident, scope, _ = icvs[name]
        return as_int(ompdModule.call_ompd_get_icv_from_scope(handle, scope, ident))

    def read_thread(tid):
        handle = capsule_or_none(ompdModule.get_thread_handle(tid, space.addr_space))
        if handle is None:
            note("thread %d: no OpenMP thread handle" % tid)
            return
        got = ompdModule.call_ompd_get_state(handle)
        if not isinstance(got, tuple):
            note("thread %d: ompd_get_state failed" % tid)
            return
        state, wait_id = got
        parallel = capsule_or_none(ompdModule.call_ompd_get_curr_parallel_handle(handle))
        task = capsule_or_none(ompdModule.call_ompd_get_curr_task_handle(handle))
        entry = as_int(ompdModule.call_ompd_get_task_function(task)) if task is not None else None
        implicit = icv(task, "implicit-task-var")
        record = {
            "tid": tid,
            "threadNum": icv(handle, "thread-num-var"),
            "state": str(space.states.get(state, "unknown-0x%x" % state)),
            "waitId": "0x%x" % (wait_id or 0),
            "function": function_name(entry),
            "entry": None if entry is None else "0x%x" % entry,
            "level": icv(parallel, "levels-var"),
            "teamSize": icv(parallel, "team-size-var"),
            "taskKind": None if implicit is None else ("implicit" if implicit else "explicit"),
        }
        print("MQD_OMPD_THREAD " + json.dumps(record), flush=True)

    for thr in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
        tid = thr.ptid[1]
        thr.switch()
        try:
            read_thread(tid)
        except Exception as e:  # noqa: BLE001  one unreadable thread must not hide the others
            note("thread %d: %s: %s" % (tid, type(e).__name__, e))


try:
    main()
except Exception as e:  # noqa: BLE001  any failure is a note; gdb still detaches
    note("%s: %s" % (type(e).__name__, e))
    traceback.print_exc()
print("MQD_OMPD_DONE", flush=True)
