/* ProcessPrng, which Rust's standard library imports from
 * bcryptprimitives.dll on Windows 10 and later. Debian's Wine 8 has no such
 * DLL, so the tests under Wine put this one beside luajit.exe; Windows
 * itself is never given it. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!RtlGenRandom(data, chunk)) return FALSE;
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
