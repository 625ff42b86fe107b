/* The first process of every pod sandbox in scripts/k8s.sh's cluster: it holds the pod's
 * namespaces open and does nothing else. It sleeps in pause() until SIGINT or SIGTERM, then
 * exits 0, and reaps any child that ends up under it (it is PID 1 of the pod's PID namespace
 * when the pod shares one), so no zombie outlives its parent. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno; /* a handler must not change errno under the interrupted code */
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static int handle(int sig, void (*handler)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("rex-pause 1");
    return 0;
  }
  if (handle(SIGINT, on_stop, 0) || handle(SIGTERM, on_stop, 0) ||
      handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART)) {
    perror("rex-pause: sigaction");
    return 1;
  }
  for (;;)
    pause();
}
