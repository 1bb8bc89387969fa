// This process as a writer of shared folders: a tag "HOST.PID" that is unique among the
// processes alive on every machine that shares a file system (NFS included), for the
// names of temporary files and unfinished work, and the one test that lets a process
// clean up another's leftovers: the tag names this host and its PID is no longer alive.
// A tag from another host is never judged dead (its PID means nothing here). A host name
// is taken to stand for one PID namespace (containers sharing a host name and a folder
// must share their PIDs too).
#ifndef FEDPRIV_CORE_PROC_H
#define FEDPRIV_CORE_PROC_H

#include <stddef.h>
#include <sys/types.h>

// Longest tag, NUL included: a host name cut to 64 characters, '.', a PID.
#define PROC_TAG_MAX 88

// This host's name as it appears in tags: [A-Za-z0-9-] only (others become '-'), at most
// 64 characters, "host" when it has none.
void proc_host(char *buf, size_t n);

// "HOST.PID" of the calling process (a forked child gets its own).
void proc_tag(char *buf, size_t n);

// Splits a tag into host and PID. 0 when s is not a tag.
int proc_tag_parse(const char *s, char *host, size_t host_n, pid_t *pid);

// 1 when the tag names this host and no process has its PID (or only a zombie: it has
// exited); 0 when the process may be alive (here, or on another host, where this
// cannot be known).
int proc_tag_is_dead(const char *tag);

#endif
