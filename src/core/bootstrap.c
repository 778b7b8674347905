/*
 * Process-mode bootstrap: rendezvous of one job's ranks over an abstract AF_UNIX
 * SOCK_SEQPACKET socket named "symcoll.<uid>.<job id>" (nothing on disk, gone when the
 * sockets close), star topology around rank 0, small-blob all-gather and fd passing
 * (SCM_RIGHTS). Every connection is checked with SO_PEERCRED; every wait is bounded by
 * the communicator's deadline and woken by symcoll_comm_abort().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

typedef struct boot {
  int listen_fd;
  int fd[SYMCOLL_MAX_RANKS]; /* rank 0: a socket per peer; others: fd[0] = socket to rank 0 */
  bool broken;               /* a peer was lost: every later exchange fails at once */
} boot_t;

static boot_t *boot_of(symcoll_comm_t comm) {
  return (boot_t *)comm->oob_state;
}

static uint64_t deadline_of(symcoll_comm_t comm) {
  return symcoll__now_ns() + (uint64_t)comm->timeout_ms * 1000000ull;
}

/* ---- wire format ------------------------------------------------------------------ */

symcoll_status_t symcoll__boot_hdr_parse(const void *buf, size_t n, symcoll__boot_hdr_t *hdr_p) {
  symcoll__boot_hdr_t h;
  if (buf == NULL || n < sizeof h) return SYMCOLL_ERR_MISMATCH;
  memcpy(&h, buf, sizeof h);
  if (h.magic != SYMCOLL_BOOT_MAGIC || h.version != SYMCOLL_BOOT_VERSION) return SYMCOLL_ERR_MISMATCH;
  if (h.type < SYMCOLL_BOOT_HELLO || h.type > SYMCOLL_BOOT_TYPE_MAX) return SYMCOLL_ERR_MISMATCH;
  if (h.len > SYMCOLL_BOOT_MAX_PAYLOAD || h.len != n - sizeof h) return SYMCOLL_ERR_MISMATCH;
  if (h.rank < 0 || h.rank >= SYMCOLL_MAX_RANKS) return SYMCOLL_ERR_MISMATCH;
  *hdr_p = h;
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__boot_hello_parse(const symcoll__boot_hdr_t *hdr, const void *payload,
                                           symcoll__boot_hello_t *hello_p) {
  symcoll__boot_hello_t h;
  if (hdr->type != SYMCOLL_BOOT_HELLO || hdr->len != sizeof h) return SYMCOLL_ERR_MISMATCH;
  memcpy(&h, payload, sizeof h);
  if (h.nranks < 1 || h.nranks > SYMCOLL_MAX_RANKS || h.rank < 0 || h.rank >= h.nranks || h.rank != hdr->rank ||
      h.pid <= 0 || (h.device_kind != 0 && h.device_kind != 1))
    return SYMCOLL_ERR_MISMATCH;
  *hello_p = h;
  return SYMCOLL_OK;
}

/* ---- bounded I/O -------------------------------------------------------------------- */

/* Waits until fd is ready for `events`, the deadline passes, or the comm is aborted. */
static symcoll_status_t wait_fd(symcoll_comm_t comm, int fd, short events, uint64_t deadline) {
  for (;;) {
    if (atomic_load(&comm->aborted)) return SYMCOLL_ERR_ABORTED;
    uint64_t now = symcoll__now_ns();
    if (now >= deadline) return SYMCOLL_ERR_TIMEOUT;
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = comm->abort_fd, .events = POLLIN}};
    int ms = (int)((deadline - now + 999999) / 1000000);
    int r = poll(p, 2, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "poll failed: %m");
      return SYMCOLL_ERR_SYSTEM;
    }
    if (p[1].revents) return SYMCOLL_ERR_ABORTED;
    if (p[0].revents) return SYMCOLL_OK; /* readable, or hung up: the read will tell */
  }
}

static symcoll_status_t send_msg(symcoll_comm_t comm, int sock, uint16_t type, int32_t status, const void *payload,
                                 size_t len, const int *fds, int nfds) {
  symcoll__boot_hdr_t h = {.magic = SYMCOLL_BOOT_MAGIC,
                           .version = SYMCOLL_BOOT_VERSION,
                           .type = type,
                           .len = (uint32_t)len,
                           .rank = comm->rank,
                           .status = status};
  struct iovec iov[2] = {{.iov_base = &h, .iov_len = sizeof h}, {.iov_base = (void *)payload, .iov_len = len}};
  union {
    char buf[CMSG_SPACE(sizeof(int) * SYMCOLL_MAX_RANKS)];
    struct cmsghdr align;
  } ctl;
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
  if (nfds > 0) {
    memset(&ctl, 0, sizeof ctl);
    m.msg_control = ctl.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
  }
  symcoll_status_t s = wait_fd(comm, sock, POLLOUT, deadline_of(comm));
  if (s != SYMCOLL_OK) return s;
  for (;;) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n >= 0) return SYMCOLL_OK;
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return SYMCOLL_ERR_PEER_LOST;
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "sendmsg failed: %m");
    return SYMCOLL_ERR_SYSTEM;
  }
}

/* Receives one message; payload must hold `cap` bytes; fds (if any) land in fds_p. */
static symcoll_status_t recv_msg(symcoll_comm_t comm, int sock, uint64_t deadline, symcoll__boot_hdr_t *hdr_p,
                                 void *payload, size_t cap, int *fds_p, int *nfds_p) {
  if (nfds_p) *nfds_p = 0;
  symcoll_status_t s = wait_fd(comm, sock, POLLIN, deadline);
  if (s != SYMCOLL_OK) return s;
  char *buf = malloc(sizeof(symcoll__boot_hdr_t) + cap);
  if (!buf) return SYMCOLL_ERR_NO_MEMORY;
  union {
    char buf[CMSG_SPACE(sizeof(int) * SYMCOLL_MAX_RANKS)];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = {.iov_base = buf, .iov_len = sizeof(symcoll__boot_hdr_t) + cap};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  ssize_t n;
  do {
    n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  int got_fds[SYMCOLL_MAX_RANKS], ngot = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n >= 0 && c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k && ngot < SYMCOLL_MAX_RANKS; i++)
        memcpy(&got_fds[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
  }
  if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
    s = SYMCOLL_ERR_PEER_LOST;
  } else if (n < 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "recvmsg failed: %m");
    s = SYMCOLL_ERR_SYSTEM;
  } else if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "bootstrap message too long (%zd bytes), dropped", n);
    s = SYMCOLL_ERR_MISMATCH;
  } else if ((s = symcoll__boot_hdr_parse(buf, (size_t)n, hdr_p)) != SYMCOLL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "malformed bootstrap message (%zd bytes), dropped", n);
  } else {
    if (hdr_p->len) memcpy(payload, buf + sizeof(symcoll__boot_hdr_t), hdr_p->len);
  }
  if (s == SYMCOLL_OK && fds_p && nfds_p) {
    memcpy(fds_p, got_fds, sizeof(int) * (size_t)ngot);
    *nfds_p = ngot;
  } else {
    for (int i = 0; i < ngot; i++) close(got_fds[i]);
  }
  free(buf);
  return s;
}

/* A failed exchange poisons the bootstrap: rank 0 closes every socket so every peer sees
 * PEER_LOST promptly instead of waiting for its own timeout. */
static symcoll_status_t boot_fail(symcoll_comm_t comm, symcoll_status_t s) {
  boot_t *b = boot_of(comm);
  if (!b->broken) SYMCOLL_INFO(SYMCOLL_SUBSYS_BOOT, "bootstrap broken: %s", symcoll_status_string(s));
  b->broken = true;
  for (int r = 0; r < comm->nranks; r++)
    if (b->fd[r] >= 0) shutdown(b->fd[r], SHUT_RDWR);
  return s;
}

/* ---- rendezvous ---------------------------------------------------------------------- */

static socklen_t make_addr(const char *job_id, struct sockaddr_un *a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "symcoll.%u.%s", (unsigned)geteuid(), job_id);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int device_kind(symcoll_comm_t comm) {
  return comm->device == SYMCOLL_DEVICE_HOST ? 0 : 1;
}

static symcoll_status_t root_accept_one(symcoll_comm_t comm, boot_t *b, uint64_t deadline, int *joined) {
  int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) return SYMCOLL_OK;
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "accept failed: %m");
    return SYMCOLL_ERR_SYSTEM;
  }
  struct ucred cred;
  socklen_t cl = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != geteuid()) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: refused a connection from pid %d uid %d (not our uid)", comm->job_id,
                 (int)cred.pid, (int)cred.uid);
    close(fd);
    return SYMCOLL_OK;
  }
  /* A peer that does not say hello within a second is dropped; the job goes on. */
  uint64_t hello_deadline = symcoll__now_ns() + 1000000000ull;
  if (hello_deadline > deadline) hello_deadline = deadline;
  symcoll__boot_hdr_t h;
  symcoll__boot_hello_t hello;
  char payload[sizeof hello];
  symcoll_status_t s = recv_msg(comm, fd, hello_deadline, &h, payload, sizeof payload, NULL, NULL);
  if (s == SYMCOLL_ERR_ABORTED) {
    close(fd);
    return s;
  }
  if (s == SYMCOLL_OK) s = symcoll__boot_hello_parse(&h, payload, &hello);
  if (s != SYMCOLL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: refused pid %d: %s", comm->job_id, (int)cred.pid,
                 s == SYMCOLL_ERR_TIMEOUT ? "said nothing within 1 s" : "did not send a symcoll hello");
    close(fd);
    return SYMCOLL_OK;
  }
  const char *why = NULL;
  if (hello.nranks != comm->nranks)
    why = "nranks differs";
  else if (hello.rank == 0 || b->fd[hello.rank] >= 0)
    why = "rank already taken";
  else if (hello.device_kind != device_kind(comm))
    why = "device kind differs";
  if (why) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: refused pid %d claiming rank %d of %d: %s", comm->job_id, (int)cred.pid,
                 hello.rank, hello.nranks, why);
    char reason[96];
    int len = snprintf(reason, sizeof reason, "%s (rank %d of %d, claimed by pid %d)", why, hello.rank, hello.nranks,
                       (int)cred.pid);
    send_msg(comm, fd, SYMCOLL_BOOT_REJECT, SYMCOLL_ERR_MISMATCH, reason, (size_t)len + 1, NULL, 0);
    close(fd);
    return SYMCOLL_OK;
  }
  b->fd[hello.rank] = fd;
  comm->pids[hello.rank] = hello.pid;
  (*joined)++;
  return SYMCOLL_OK;
}

static symcoll_status_t root_rendezvous(symcoll_comm_t comm, boot_t *b, uint64_t deadline) {
  struct sockaddr_un a;
  socklen_t al = make_addr(comm->job_id, &a);
  b->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (b->listen_fd < 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "socket failed: %m");
    return SYMCOLL_ERR_SYSTEM;
  }
  if (bind(b->listen_fd, (struct sockaddr *)&a, al) != 0) {
    if (errno == EADDRINUSE) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank 0 is already taken by another process", comm->job_id);
      return SYMCOLL_ERR_MISMATCH;
    }
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "bind failed: %m");
    return SYMCOLL_ERR_SYSTEM;
  }
  if (listen(b->listen_fd, SYMCOLL_MAX_RANKS) != 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "listen failed: %m");
    return SYMCOLL_ERR_SYSTEM;
  }
  int joined = 1;
  const uint64_t start = symcoll__now_ns();
  uint64_t report = start + SYMCOLL_WAIT_REPORT_NS;
  if (comm->nranks > 1)
    SYMCOLL_INFO(SYMCOLL_SUBSYS_BOOT, "job %s: rank 0 waiting for %d more ranks to join", comm->job_id,
                 comm->nranks - 1);
  while (joined < comm->nranks) {
    /* Wake up to say who is missing, every so often, until the deadline. */
    symcoll_status_t s = wait_fd(comm, b->listen_fd, POLLIN, report < deadline ? report : deadline);
    if (s == SYMCOLL_ERR_TIMEOUT && symcoll__now_ns() < deadline) {
      char missing[256] = "";
      for (int r = 1, len = 0; r < comm->nranks && len < (int)sizeof missing - 8; r++)
        if (b->fd[r] < 0) len += snprintf(missing + len, sizeof missing - (size_t)len, "%s%d", len ? "," : "", r);
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank 0 still waiting for ranks %s to join (%.0f s of %.0f s)",
                   comm->job_id, missing, (double)(symcoll__now_ns() - start) * 1e-9, comm->timeout_ms * 1e-3);
      report += 2 * SYMCOLL_WAIT_REPORT_NS;
      continue;
    }
    if (s == SYMCOLL_ERR_TIMEOUT) {
      for (int r = 1; r < comm->nranks; r++)
        if (b->fd[r] < 0) SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank %d never joined", comm->job_id, r);
    }
    if (s == SYMCOLL_OK) s = root_accept_one(comm, b, deadline, &joined);
    if (s != SYMCOLL_OK) return s;
  }
  /* Everyone is here. Refuse whoever is still queued (a second claimant of a rank), then
   * close: the name disappears, so nothing of ours stays in the namespace. */
  for (int fd; (fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0;) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: refused a late connection: all ranks are here", comm->job_id);
    send_msg(comm, fd, SYMCOLL_BOOT_REJECT, SYMCOLL_ERR_MISMATCH, NULL, 0, NULL, 0);
    /* Closing with its hello unread would reset the connection and lose the refusal. */
    symcoll__boot_hdr_t h;
    char hello[sizeof(symcoll__boot_hello_t)];
    recv_msg(comm, fd, symcoll__now_ns() + 200000000ull, &h, hello, sizeof hello, NULL, NULL);
    close(fd);
  }
  close(b->listen_fd);
  b->listen_fd = -1;
  for (int r = 1; r < comm->nranks; r++) {
    symcoll_status_t s =
        send_msg(comm, b->fd[r], SYMCOLL_BOOT_WELCOME, 0, comm->pids, sizeof(pid_t) * (size_t)comm->nranks, NULL, 0);
    if (s != SYMCOLL_OK) return s;
  }
  return SYMCOLL_OK;
}

/* Connects to rank 0, retrying until the deadline: rank 0 may not be there yet. */
static symcoll_status_t peer_connect(symcoll_comm_t comm, uint64_t deadline, int *fd_p) {
  struct sockaddr_un a;
  socklen_t al = make_addr(comm->job_id, &a);
  long backoff_us = 200;
  const uint64_t start = symcoll__now_ns();
  uint64_t report = start + SYMCOLL_WAIT_REPORT_NS;
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "socket failed: %m");
      return SYMCOLL_ERR_SYSTEM;
    }
    if (connect(fd, (struct sockaddr *)&a, al) == 0) {
      *fd_p = fd;
      return SYMCOLL_OK;
    }
    int err = errno;
    close(fd);
    if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN && err != EINTR) {
      errno = err;
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "connect failed: %m");
      return SYMCOLL_ERR_SYSTEM;
    }
    if (atomic_load(&comm->aborted)) return SYMCOLL_ERR_ABORTED;
    const uint64_t now = symcoll__now_ns();
    if (now >= deadline) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank 0 never appeared", comm->job_id);
      return SYMCOLL_ERR_TIMEOUT;
    }
    if (now >= report) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank %d still waiting for rank 0 to appear (%.0f s of %.0f s)",
                   comm->job_id, comm->rank, (double)(now - start) * 1e-9, comm->timeout_ms * 1e-3);
      report += 2 * SYMCOLL_WAIT_REPORT_NS;
    }
    struct pollfd p = {.fd = comm->abort_fd, .events = POLLIN};
    poll(&p, 1, (int)(backoff_us / 1000) + 1);
    if (backoff_us < 20000) backoff_us *= 2;
  }
}

static symcoll_status_t peer_rendezvous(symcoll_comm_t comm, boot_t *b, uint64_t deadline) {
  symcoll__boot_hello_t hello = {
      .rank = comm->rank, .nranks = comm->nranks, .pid = (int32_t)getpid(), .device_kind = device_kind(comm)};
  symcoll__boot_hdr_t h;
  union {
    pid_t pids[SYMCOLL_MAX_RANKS];
    char reason[256];
  } msg;
  pid_t *pids = msg.pids;
  for (;;) {
    SYMCOLL_CHECK(peer_connect(comm, deadline, &b->fd[0]));
    /* If rank 0 refused us before reading the hello, the send fails but the refusal waits. */
    symcoll_status_t sent = send_msg(comm, b->fd[0], SYMCOLL_BOOT_HELLO, 0, &hello, sizeof hello, NULL, 0);
    if (sent != SYMCOLL_OK && sent != SYMCOLL_ERR_PEER_LOST) return sent;
    symcoll__fault_point(comm->rank, "boot");
    memset(&h, 0, sizeof h);
    symcoll_status_t s = recv_msg(comm, b->fd[0], deadline, &h, &msg, sizeof msg, NULL, NULL);
    if (s == SYMCOLL_OK && (sent == SYMCOLL_OK || h.type == SYMCOLL_BOOT_REJECT)) break;
    if (s != SYMCOLL_OK && s != SYMCOLL_ERR_PEER_LOST) return s;
    /* Reset before we were welcomed (a rendezvous closing under us): nothing was joined,
     * so knock again until the deadline. */
    close(b->fd[0]);
    b->fd[0] = -1;
  }
  if (h.type == SYMCOLL_BOOT_REJECT) {
    msg.reason[sizeof msg.reason - 1] = 0;
    SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank 0 refused rank %d: %s", comm->job_id, comm->rank,
                 h.len ? msg.reason : "the rendezvous is complete: every rank is already here");
    return h.status < 0 ? (symcoll_status_t)h.status : SYMCOLL_ERR_MISMATCH;
  }
  if (h.type != SYMCOLL_BOOT_WELCOME || h.len != sizeof(pid_t) * (size_t)comm->nranks) return SYMCOLL_ERR_MISMATCH;
  memcpy(comm->pids, pids, h.len);
  return SYMCOLL_OK;
}

/* ---- oob operations -------------------------------------------------------------------- */

static symcoll_status_t boot_allgather(symcoll_comm_t comm, const void *in, void *out, size_t bytes) {
  boot_t *b = boot_of(comm);
  size_t total = bytes * (size_t)comm->nranks;
  if (b->broken) return SYMCOLL_ERR_PEER_LOST;
  if (total > SYMCOLL_BOOT_MAX_PAYLOAD) return SYMCOLL_ERR_INVALID_ARGUMENT;
  uint64_t deadline = deadline_of(comm);
  symcoll__boot_hdr_t h;
  symcoll_status_t s;
  if (comm->rank != 0) {
    s = send_msg(comm, b->fd[0], SYMCOLL_BOOT_DATA, 0, in, bytes, NULL, 0);
    if (s == SYMCOLL_OK) s = recv_msg(comm, b->fd[0], deadline, &h, out, total, NULL, NULL);
    if (s == SYMCOLL_OK && (h.type != SYMCOLL_BOOT_DATA || h.len != total)) s = SYMCOLL_ERR_MISMATCH;
    return s == SYMCOLL_OK ? s : boot_fail(comm, s);
  }
  char *tmp = malloc(total);
  if (!tmp) return SYMCOLL_ERR_NO_MEMORY;
  memcpy(tmp, in, bytes);
  s = SYMCOLL_OK;
  for (int r = 1; r < comm->nranks && s == SYMCOLL_OK; r++) {
    s = recv_msg(comm, b->fd[r], deadline, &h, tmp + bytes * (size_t)r, bytes, NULL, NULL);
    if (s == SYMCOLL_ERR_PEER_LOST || s == SYMCOLL_ERR_TIMEOUT)
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "job %s: rank %d %s", comm->job_id, r,
                   s == SYMCOLL_ERR_PEER_LOST ? "is gone" : "did not answer in time");
    if (s == SYMCOLL_OK && (h.type != SYMCOLL_BOOT_DATA || h.len != bytes)) s = SYMCOLL_ERR_MISMATCH;
  }
  for (int r = 1; r < comm->nranks && s == SYMCOLL_OK; r++)
    s = send_msg(comm, b->fd[r], SYMCOLL_BOOT_DATA, 0, tmp, total, NULL, 0);
  if (s == SYMCOLL_OK) memcpy(out, tmp, total);
  free(tmp);
  return s == SYMCOLL_OK ? s : boot_fail(comm, s);
}

static symcoll_status_t boot_bcast(symcoll_comm_t comm, void *buf, size_t bytes) {
  boot_t *b = boot_of(comm);
  if (b->broken) return SYMCOLL_ERR_PEER_LOST;
  if (bytes > SYMCOLL_BOOT_MAX_PAYLOAD) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll_status_t s = SYMCOLL_OK;
  if (comm->rank == 0) {
    for (int r = 1; r < comm->nranks && s == SYMCOLL_OK; r++)
      s = send_msg(comm, b->fd[r], SYMCOLL_BOOT_DATA, 0, buf, bytes, NULL, 0);
  } else {
    symcoll__boot_hdr_t h;
    s = recv_msg(comm, b->fd[0], deadline_of(comm), &h, buf, bytes, NULL, NULL);
    if (s == SYMCOLL_OK && (h.type != SYMCOLL_BOOT_DATA || h.len != bytes)) s = SYMCOLL_ERR_MISMATCH;
  }
  return s == SYMCOLL_OK ? s : boot_fail(comm, s);
}

static symcoll_status_t boot_exchange_fd(symcoll_comm_t comm, int my_fd, int *fds_p) {
  boot_t *b = boot_of(comm);
  if (b->broken) return SYMCOLL_ERR_PEER_LOST;
  uint64_t deadline = deadline_of(comm);
  int fds[SYMCOLL_MAX_RANKS], n = comm->nranks, got = 0;
  symcoll__boot_hdr_t h;
  symcoll_status_t s = SYMCOLL_OK;
  for (int r = 0; r < n; r++) fds[r] = -1;
  if (comm->rank != 0) {
    s = send_msg(comm, b->fd[0], SYMCOLL_BOOT_FD, 0, NULL, 0, &my_fd, 1);
    if (s == SYMCOLL_OK) s = recv_msg(comm, b->fd[0], deadline, &h, NULL, 0, fds, &got);
    if (s == SYMCOLL_OK && (h.type != SYMCOLL_BOOT_FD || got != n)) s = SYMCOLL_ERR_MISMATCH;
    if (s != SYMCOLL_OK) {
      for (int i = 0; i < got; i++) close(fds[i]);
      return boot_fail(comm, s);
    }
    memcpy(fds_p, fds, sizeof(int) * (size_t)n);
    return SYMCOLL_OK;
  }
  fds[0] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
  if (fds[0] < 0) s = SYMCOLL_ERR_SYSTEM;
  for (int r = 1; r < n && s == SYMCOLL_OK; r++) {
    int one = -1;
    s = recv_msg(comm, b->fd[r], deadline, &h, NULL, 0, &one, &got);
    if (s == SYMCOLL_OK && (h.type != SYMCOLL_BOOT_FD || got != 1)) {
      if (got == 1) close(one);
      s = SYMCOLL_ERR_MISMATCH;
    }
    if (s == SYMCOLL_OK) fds[r] = one;
  }
  for (int r = 1; r < n && s == SYMCOLL_OK; r++) s = send_msg(comm, b->fd[r], SYMCOLL_BOOT_FD, 0, NULL, 0, fds, n);
  if (s != SYMCOLL_OK) {
    for (int r = 0; r < n; r++)
      if (fds[r] >= 0) close(fds[r]);
    return boot_fail(comm, s);
  }
  memcpy(fds_p, fds, sizeof(int) * (size_t)n);
  return SYMCOLL_OK;
}

static void boot_destroy(symcoll_comm_t comm) {
  boot_t *b = boot_of(comm);
  if (!b) return;
  if (b->listen_fd >= 0) close(b->listen_fd);
  for (int r = 0; r < SYMCOLL_MAX_RANKS; r++)
    if (b->fd[r] >= 0) close(b->fd[r]);
  free(b);
  comm->oob_state = NULL;
}

static const symcoll__oob_t boot_oob = {
    .allgather = boot_allgather,
    .bcast = boot_bcast,
    .exchange_fd = boot_exchange_fd,
    .destroy = boot_destroy,
};

symcoll_status_t symcoll__bootstrap_init(symcoll_comm_t comm) {
  boot_t *b = calloc(1, sizeof *b);
  if (!b) return SYMCOLL_ERR_NO_MEMORY;
  b->listen_fd = -1;
  for (int r = 0; r < SYMCOLL_MAX_RANKS; r++) b->fd[r] = -1;
  comm->oob = &boot_oob;
  comm->oob_state = b;
  comm->pids[comm->rank] = getpid();
  uint64_t deadline = deadline_of(comm);
  symcoll_status_t s = comm->rank == 0 ? root_rendezvous(comm, b, deadline) : peer_rendezvous(comm, b, deadline);
  if (s != SYMCOLL_OK) {
    boot_destroy(comm);
    comm->oob = NULL;
    return s;
  }
  /* pidfds let a spinning rank notice a peer's death long before its timeout. */
  for (int r = 0; r < comm->nranks; r++) {
    comm->pidfds[r] = -1;
#ifdef SYS_pidfd_open
    if (r != comm->rank) comm->pidfds[r] = (int)syscall(SYS_pidfd_open, comm->pids[r], 0);
#endif
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_BOOT, "job %s: rank %d of %d joined", comm->job_id, comm->rank, comm->nranks);
  return SYMCOLL_OK;
}
