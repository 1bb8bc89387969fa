// Process tags (core/proc.h).
#include "core/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void proc_host(char *buf, size_t n) {
    char raw[256] = "";
    if (gethostname(raw, sizeof raw - 1) != 0)
        raw[0] = 0;
    raw[sizeof raw - 1] = 0;
    // The first label only would clash between "node1.a" and "node1.b": keep the whole
    // name, with dots replaced, since '.' separates the host from the PID.
    size_t k = 0;
    for (const char *p = raw; *p && k + 1 < n && k < 64; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        buf[k++] = ok ? c : '-';
    }
    if (n == 0)
        return;
    buf[k] = 0;
    if (k == 0)
        snprintf(buf, n, "host");
}

void proc_tag(char *buf, size_t n) {
    char host[72];
    proc_host(host, sizeof host);
    snprintf(buf, n, "%s.%ld", host, (long)getpid());
}

int proc_tag_parse(const char *s, char *host, size_t host_n, pid_t *pid) {
    const char *dot = strrchr(s, '.');
    if (!dot || dot == s || (size_t)(dot - s) >= host_n || !dot[1])
        return 0;
    for (const char *p = s; p < dot; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return 0;
    char *end;
    errno = 0;
    long v = strtol(dot + 1, &end, 10);
    if (errno || *end || v <= 0 || v > 0x7fffffffL || dot[1] == '+' || dot[1] == '-' || dot[1] == ' ')
        return 0;
    memcpy(host, s, (size_t)(dot - s));
    host[dot - s] = 0;
    *pid = (pid_t)v;
    return 1;
}

int proc_tag_is_dead(const char *tag) {
    char host[72], me[72];
    pid_t pid;
    if (!proc_tag_parse(tag, host, sizeof host, &pid))
        return 0;
    proc_host(me, sizeof me);
    if (strcmp(host, me) != 0)
        return 0;
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    // A zombie has exited (its files are closed, it writes nothing more) but exists until
    // its parent reaps it, which for an orphan may take a while: count it as dead.
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close = strrchr(buf, ')'); // "pid (comm) S ...": comm may hold spaces
    return close && (close[1] == ' ') && (close[2] == 'Z' || close[2] == 'X');
}
