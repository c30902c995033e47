// Package chaos runs a small strata deployment on this machine and breaks it on purpose: the
// cluster and the fault library that the robustness harness (internal/robustness) drives while
// its clients record histories. Everything is real — PostgreSQL from the machine's binaries,
// the strata binary, TCP between them — because the faults that matter (a statement cut
// mid-flight, a COMMIT whose answer is lost, a replica that cannot reach the database while the
// others can) only happen to real connections.
//
// # Cluster
//
//	bin, err := chaos.BuildStrata(ctx, dir)              // go build ./cmd/strata; BuildStrata(ctx, dir, "sabotage") for a control build
//	c, err := chaos.Start(ctx, chaos.Options{Replicas: 3, Standby: true, Binary: bin, Log: w})
//	defer c.Stop()
//	for _, r := range c.Replicas() { r.URL() }           // http://127.0.0.1:port, stable across restarts
//	                                                     // (through a client proxy with Options.ClientProxy; r.DirectURL() never)
//	c.AdminToken()                                       // the bootstrap admin token (Authorization: Bearer …)
//	c.DatabaseURL()                                      // direct (no proxy) URL, multi-host with a standby
//	c.PrimaryURL()                                       // direct single-host URL of the current primary (lib/pq)
//	c.WaitIdle(ctx)                                      // drain: no strata transaction left open
//
// Start initialises PostgreSQL (the installed major version, found as internal/pgembed finds
// it; run as the postgres user when the process is root) on loopback with fsync, full page
// writes and synchronous_commit on — durability is part of what is under test. With Standby, a
// second server streams from it as a synchronous standby (synchronous_standby_names = '*'), so
// a write PostgreSQL acknowledged is on both. strata's schema lives in the "postgres"
// database. Each replica is `strata serve` (the Binary, with Options.Args appended and
// Options.Env added to this process's environment) on a fixed loopback port chosen at Start,
// with a data directory of its own and one encryption key file shared by all replicas. Each
// replica reaches PostgreSQL only through a TCP proxy of its own (one listener per PostgreSQL
// server; with a standby its URL is multi-host with target_session_attrs=read-write), which is
// how the network faults reach one replica and not the others. Replica 0 starts first with
// STRATA_BOOTSTRAP_TOKEN set to AdminToken (so the token exists exactly once); the others then
// start together. Start returns when every replica answers GET /readyz?writes=true with 200.
//
// Replica.Kill9 sends SIGKILL and waits for the exit; Replica.Restart(ctx) starts the same
// binary with the same arguments and port and waits until it is ready; Replica.Pause and
// Resume send SIGSTOP and SIGCONT; Replica.Pid is the running process's id (0 when none).
// Cluster.WaitReady waits for every replica. Cluster.WaitIdle is the drain before ground truth
// is read: it waits until no backend whose application_name starts with "strata" holds a
// transaction that wrote (or sits idle in one), since a request whose client gave up may still
// commit (internal/db pools call themselves "strata" by default, so a harness's own must be
// idle too).
//
// Cluster.Stop (idempotent) heals the proxies, stops the replicas (SIGTERM, then SIGKILL after
// 15 s), stops PostgreSQL (-m immediate) and removes the directory when Start made it; with
// Options.Dir set (it must not hold an earlier cluster) the directory — PostgreSQL's logs in
// pg/*.log, every data directory — is kept for the report. Options.Log receives every
// replica's log lines, prefixed "replica N: ", and one "chaos: " line per fault injected or
// healed. A test run that is killed cannot Stop: its replicas die with it (a parent-death
// signal), and the next Start stops the PostgreSQL servers of temporary cluster directories
// whose owner is gone and removes the directories, as internal/pgtest does for its clusters.
//
// # Faults
//
//	type Fault interface {
//		Name() string
//		Inject(ctx context.Context) error
//		Heal(ctx context.Context) error
//	}
//
// Inject breaks something and returns as soon as it is broken; Heal repairs it and returns once
// the cluster is whole again: every replica running and answering /readyz?writes=true with 200
// (Heal without a deadline in ctx waits at most two minutes). A fault can be injected again
// after it healed. Cluster.Faults returns the set, one of each, in this order: PGStop
// fast and immediate, Kill9, CutConnections, Delay, Blackhole, TerminateBackends, and Promote
// with a standby (Kill9, Delay and Blackhole aimed at the last replica). Cluster.ExtraFaults
// returns the ones added since: Pause (the last replica), LoseCommitAnswers, StopStandby with
// a standby, CutClients with Options.ClientProxy. The constructors make them for any replica.
// Pick faults by Name, not by position:
//
//   - PGStop("fast"), PGStop("immediate"), named pg-restart-fast and pg-restart-immediate:
//     Inject runs pg_ctl stop -m fast (clients disconnected, a shutdown checkpoint) or
//     -m immediate (a crash: no checkpoint, recovery from WAL at the next start) on the
//     current primary; Heal starts it again. The outage lasts from Inject to Heal.
//   - Kill9(i), kill9-replica-i: SIGKILL of replica i, whatever it was doing; Heal restarts it.
//   - CutConnections(), cut-connections: every database connection of every replica is reset
//     (TCP RST from the proxy, both ends), mid-statement or mid-COMMIT for those in use. A
//     one-shot: the replicas reconnect at once; Heal only waits.
//   - Delay(i, base, jitter), delay-replica-i: replica i's database traffic is delayed by base ±
//     jitter per chunk, in both directions, order kept (Faults uses 75 ± 50 ms); Heal stops
//     delaying.
//   - Blackhole(i), blackhole-replica-i: a partition between replica i and PostgreSQL: nothing
//     it sends or is sent is forwarded, and its new connections are accepted but never reach
//     the server, while the other replicas go on. Heal forwards what was held, in order, as a
//     healed network would deliver it (a connection the replica gave up meanwhile is closed).
//   - TerminateBackends(), terminate-backends: SELECT pg_terminate_backend(pid) of every
//     backend connected through a replica's proxy (all of strata's pools and sessions, on
//     every replica, picked by client_port; a harness's own connections, though they may call
//     themselves "strata" too, stay); Heal only waits.
//   - Pause(i), pause-replica-i: SIGSTOP of replica i: it keeps its connections, sessions,
//     advisory locks and port, and answers nothing (its index goes stale while clients still
//     reach it); Heal sends SIGCONT.
//   - LoseCommitAnswers(), lose-commit-answers: from Inject to Heal, every replica's proxy
//     drops PostgreSQL's answer to each COMMIT that committed (its CommandComplete "COMMIT",
//     sent once the commit is durable and replicated) and resets the connection: the write is
//     applied and strata cannot know it, so it must answer with an unknown outcome, never a
//     failure.
//   - Promote(), promote-standby (needs Standby): the primary is stopped -m immediate and the
//     synchronous standby promoted; Inject returns once it accepts writes. The replicas' multi-
//     host URL finds it. Heal rebuilds the old primary as the new synchronous standby
//     (pg_basebackup), so the fault can be injected again (the roles alternate).
//   - StopStandby(), stop-standby (needs Standby): the synchronous standby stops (-m fast), so
//     every COMMIT that wrote waits for it (and what needs the rows such a COMMIT holds waits
//     behind it) until Heal starts it again; a client that gives up meanwhile has an unknown
//     outcome: committed locally if it waited in its own COMMIT, rolled back if it waited for a
//     lock.
//   - CutClients(), cut-client-connections (needs Options.ClientProxy): every client
//     connection of every replica is reset by its client proxy: requests in flight lose their
//     answers, watch streams end mid-stream, and the replicas run on. A one-shot; Heal only
//     waits.
//
// Combine(f...) injects several faults together (in order) and heals them all (in reverse)
// before it waits once for readiness. The faults that stop a PostgreSQL server (PGStop,
// Promote, StopStandby) are serialized on the cluster and must not be combined with one
// another; the proxy faults, Kill9, Pause and TerminateBackends combine freely with
// everything. Since Heal waits for every replica, a fault healed while another is still
// injected may wait for that one (a blackholed or paused replica is not ready): overlap
// faults through Combine, or heal them in the reverse order of injection.
//
// # Reaching the proxies
//
// Replica.DatabaseURL is the URL the replica was given (through its proxy); Replica.Proxy is
// the proxy itself (Cut, SetDelay, Blackhole, LoseCommitAnswers, LostCommits, Heal), for
// faults a harness wants to time itself; Replica.ClientProxy is the one in front of it (nil
// without Options.ClientProxy). Readiness is always probed directly, not through it.
package chaos
