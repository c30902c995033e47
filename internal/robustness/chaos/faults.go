package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Fault is one way to break the cluster. Inject breaks it and returns once it is broken; Heal
// repairs it and returns once every replica is ready again (see the package doc).
type Fault interface {
	Name() string
	Inject(ctx context.Context) error
	Heal(ctx context.Context) error
}

// fault is a Fault made of two steps; Heal adds the wait for readiness to heal, so that
// Combine can heal several before it waits once.
type fault struct {
	c      *Cluster
	name   string
	inject func(ctx context.Context) error
	heal   func(ctx context.Context) error
}

func (f *fault) Name() string { return f.name }

func (f *fault) Inject(ctx context.Context) error {
	f.c.logf("inject %s", f.name)
	if err := f.inject(ctx); err != nil {
		return fmt.Errorf("inject %s: %w", f.name, err)
	}
	f.c.logf("injected %s", f.name)
	return nil
}

func (f *fault) Heal(ctx context.Context) error {
	f.c.logf("heal %s", f.name)
	if err := f.heal(ctx); err != nil {
		return fmt.Errorf("heal %s: %w", f.name, err)
	}
	if err := f.c.WaitReady(ctx); err != nil {
		return fmt.Errorf("heal %s: %w", f.name, err)
	}
	f.c.logf("healed %s", f.name)
	return nil
}

func nothing(context.Context) error { return nil }

// Faults returns the fault set, one of each, in the package doc's order, as the first
// version of this package did (a harness's short run injects each in turn, so the list stays
// this size): Kill9, Delay and Blackhole aim at the last replica, and Promote is there only
// with a standby.
func (c *Cluster) Faults() []Fault {
	last := len(c.replicas) - 1
	fs := []Fault{
		c.PGStop("fast"),
		c.PGStop("immediate"),
		c.Kill9(last),
		c.CutConnections(),
		c.Delay(last, 75*time.Millisecond, 50*time.Millisecond),
		c.Blackhole(last),
		c.TerminateBackends(),
	}
	if c.pg.standbyNode() != nil {
		fs = append(fs, c.Promote())
	}
	return fs
}

// ExtraFaults returns the faults added since, one of each, for long runs: Pause aims at the
// last replica, StopStandby is there only with a standby, CutClients only with
// Options.ClientProxy.
func (c *Cluster) ExtraFaults() []Fault {
	fs := []Fault{c.Pause(len(c.replicas) - 1), c.LoseCommitAnswers()}
	if c.pg.standbyNode() != nil {
		fs = append(fs, c.StopStandby())
	}
	if c.opts.ClientProxy {
		fs = append(fs, c.CutClients())
	}
	return fs
}

// CutClients resets every client connection of every replica at Inject (needs
// Options.ClientProxy): requests in flight lose their answers, watch streams end mid-stream,
// and the replicas run on. Heal only waits.
func (c *Cluster) CutClients() Fault {
	return &fault{c: c, name: "cut-client-connections",
		inject: func(context.Context) error {
			n := 0
			for _, r := range c.replicas {
				if r.front == nil {
					return errors.New("cut-client-connections needs Options.ClientProxy")
				}
				n += r.front.Cut()
			}
			c.logf("cut %d client connections", n)
			return nil
		},
		heal: nothing,
	}
}

// Pause stops replica i with SIGSTOP at Inject and continues it at Heal.
func (c *Cluster) Pause(i int) Fault {
	r := c.replicas[i]
	return &fault{c: c, name: fmt.Sprintf("pause-replica-%d", i),
		inject: func(context.Context) error { return r.Pause() },
		heal:   func(context.Context) error { return r.Resume() },
	}
}

// StopStandby stops the synchronous standby at Inject (commits wait for it) and starts it at
// Heal.
func (c *Cluster) StopStandby() Fault {
	return &fault{c: c, name: "stop-standby",
		inject: c.pg.stopStandby,
		heal:   c.pg.startStandby,
	}
}

// PGStop stops the primary with pg_ctl stop -m mode ("fast" or "immediate") at Inject and
// starts it at Heal.
func (c *Cluster) PGStop(mode string) Fault {
	return &fault{c: c, name: "pg-restart-" + mode,
		inject: func(ctx context.Context) error { return c.pg.stopPrimary(ctx, mode) },
		heal:   c.pg.startPrimary,
	}
}

// Kill9 kills replica i with SIGKILL at Inject and restarts it at Heal.
func (c *Cluster) Kill9(i int) Fault {
	r := c.replicas[i]
	return &fault{c: c, name: fmt.Sprintf("kill9-replica-%d", i),
		inject: func(context.Context) error { return r.Kill9() },
		heal:   r.Restart,
	}
}

// CutConnections resets every replica's database connections at Inject.
func (c *Cluster) CutConnections() Fault {
	return &fault{c: c, name: "cut-connections",
		inject: func(context.Context) error {
			n := 0
			for _, r := range c.replicas {
				n += r.proxy.Cut()
			}
			c.logf("cut %d connections", n)
			return nil
		},
		heal: nothing,
	}
}

// LoseCommitAnswers drops the answer of every COMMIT that committed, on every replica's
// database connections, from Inject to Heal (see Proxy.LoseCommitAnswers).
func (c *Cluster) LoseCommitAnswers() Fault {
	set := func(on bool) {
		for _, r := range c.replicas {
			r.proxy.LoseCommitAnswers(on)
		}
	}
	return &fault{c: c, name: "lose-commit-answers",
		inject: func(context.Context) error { set(true); return nil },
		heal: func(context.Context) error {
			set(false)
			var n int64
			for _, r := range c.replicas {
				n += r.proxy.LostCommits()
			}
			c.logf("%d COMMIT answers lost so far", n)
			return nil
		},
	}
}

// Delay delays replica i's database traffic by base ± jitter from Inject to Heal.
func (c *Cluster) Delay(i int, base, jitter time.Duration) Fault {
	p := c.replicas[i].proxy
	return &fault{c: c, name: fmt.Sprintf("delay-replica-%d", i),
		inject: func(context.Context) error { p.SetDelay(base, jitter); return nil },
		heal:   func(context.Context) error { p.SetDelay(0, 0); return nil },
	}
}

// Blackhole partitions replica i from PostgreSQL from Inject to Heal.
func (c *Cluster) Blackhole(i int) Fault {
	p := c.replicas[i].proxy
	return &fault{c: c, name: fmt.Sprintf("blackhole-replica-%d", i),
		inject: func(context.Context) error { p.Blackhole(); return nil },
		heal:   func(context.Context) error { p.Heal(); return nil },
	}
}

// TerminateBackends ends every replica's backends with pg_terminate_backend at Inject: those
// connected through the replicas' proxies, and no other (a harness's own connections stay).
func (c *Cluster) TerminateBackends() Fault {
	return &fault{c: c, name: "terminate-backends",
		inject: func(ctx context.Context) error {
			var ports []int32
			for _, r := range c.replicas {
				ports = append(ports, r.proxy.upstreamPorts()...)
			}
			n, err := c.pg.terminate(ctx, ports)
			c.logf("terminated %d backends", n)
			return err
		},
		heal: nothing,
	}
}

// Promote crashes the primary and promotes the synchronous standby at Inject; Heal rebuilds
// the old primary as the new standby.
func (c *Cluster) Promote() Fault {
	return &fault{c: c, name: "promote-standby",
		inject: c.pg.promote,
		heal:   c.pg.rebuildStandby,
	}
}

// Combine is one fault made of several: Inject injects each in order (undoing nothing if one
// fails: Heal heals them all), Heal heals each in reverse order and then waits once.
func Combine(faults ...Fault) Fault {
	names := make([]string, len(faults))
	var c *Cluster
	for i, f := range faults {
		names[i] = f.Name()
		if ff, ok := f.(*fault); ok {
			c = ff.c
		}
	}
	return &combined{c: c, name: strings.Join(names, "+"), faults: faults}
}

type combined struct {
	c      *Cluster
	name   string
	faults []Fault
}

func (f *combined) Name() string { return f.name }

func (f *combined) Inject(ctx context.Context) error {
	for _, x := range f.faults {
		if err := x.Inject(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (f *combined) Heal(ctx context.Context) error {
	var errs []error
	for i := len(f.faults) - 1; i >= 0; i-- {
		x := f.faults[i]
		if ff, ok := x.(*fault); ok {
			ff.c.logf("heal %s", ff.name)
			if err := ff.heal(ctx); err != nil {
				errs = append(errs, fmt.Errorf("heal %s: %w", ff.name, err))
			}
			continue
		}
		if err := x.Heal(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if f.c != nil {
		if err := f.c.WaitReady(ctx); err != nil {
			return fmt.Errorf("heal %s: %w", f.name, err)
		}
		f.c.logf("healed %s", f.name)
	}
	return nil
}
