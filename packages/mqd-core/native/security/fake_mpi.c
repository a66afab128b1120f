/* An attacker's stand-in for an MPI library, built as libmpi.so.40: a rank-looking process
   maps it and names the attacker's own "DLL" in MPIR_dll_name (security tests). */
#include <string.h>

char MPIR_dll_name[4096] = "";

void fake_mpi_init(const char *dll) { strncpy(MPIR_dll_name, dll, sizeof MPIR_dll_name - 1); }
