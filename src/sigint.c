/* sigint.c: the ds prompt's SIGINT handler, which survives any number of Ctrl-C. It calls the handler it replaced
   (luajit's: the running Lua code raises "interrupted!" at its next instruction, once a C kernel has returned)
   and puts itself back at once, since luajit's handler resets SIGINT to the default action (a second Ctrl-C
   during a long kernel killed the process). Declared by lua/ds/repl.lua, not ds.h: only the prompt uses it. */
#include <signal.h>
#include <string.h>

static void (*chained)(int); /* the handler replaced (luajit's), or NULL */
static struct sigaction own; /* this handler */

static void on_sigint(int sig) {
  if (chained) chained(sig);
  sigaction(SIGINT, &own, NULL); /* async-signal-safe */
}

/* install the handler, chaining the current one; again: put it back if something replaced it. 0 on success, 1
   when there is no plain handler to chain (not under luajit's interpreter: nothing is changed) */
int ds_sigint_install(void) {
  struct sigaction old;
  if (sigaction(SIGINT, NULL, &old) != 0) return -1;
  if (old.sa_handler == on_sigint) return 0;
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN) {
    if (!chained) return 1;
  } else chained = old.sa_handler;
  memset(&own, 0, sizeof own);
  own.sa_handler = on_sigint;
  sigemptyset(&own.sa_mask);
  own.sa_flags = SA_RESTART;
  return sigaction(SIGINT, &own, NULL);
}
