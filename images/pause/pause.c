/* The pod sandbox ("pause") process for the local node: holds the pod's namespaces, reaps the
 * zombies of processes reparented to it (it is PID 1 of the pod when the PID namespace is shared),
 * and exits cleanly on SIGINT/SIGTERM. Our own few lines, built static by e2e/build/images.sh
 * into registry.k8s.io/pause:3.10 (the ref the node's containerd uses as sandbox_image). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PAUSE_VERSION
#define PAUSE_VERSION "3.10-koo"
#endif

static void on_term(int sig) {
    /* Only async-signal-safe calls here. */
    static const char msg[] = "pause: shutting down\n";
    (void)sig;
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(0);
}

static void on_child(int sig) {
    int saved = errno;
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

int main(int argc, char **argv) {
    struct sigaction sa;
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        printf("pause.c %s\n", PAUSE_VERSION);
        return 0;
    }
    if (getpid() != 1) {
        fprintf(stderr, "pause: warning: not PID 1\n");
    }
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_term;
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGCHLD, &sa, NULL) < 0) {
        perror("pause: sigaction");
        return 2;
    }
    for (;;) {
        pause();
    }
    return 42; /* not reached */
}
