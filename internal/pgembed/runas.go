package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// serviceUser is the system account PostgreSQL runs as when strata runs as root; Debian's
// postgresql package creates it.
const serviceUser = "postgres"

// runAs is the user that runs initdb, pg_ctl and postgres.
type runAs struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32 // every group the user is in, primary included
	home   string
	cred   *syscall.Credential // nil: run as this process's own user
}

// resolveRunAs picks the user PostgreSQL runs as: this process's user, or the postgres
// system user when this process is root (PostgreSQL refuses to run as root).
func resolveRunAs() (runAs, error) {
	if os.Geteuid() != 0 {
		r := runAs{uid: uint32(os.Geteuid()), gid: uint32(os.Getegid()), name: strconv.Itoa(os.Geteuid())}
		if u, err := user.Current(); err == nil {
			r.name, r.home = u.Username, u.HomeDir
		}
		gs, _ := os.Getgroups()
		for _, g := range gs {
			r.groups = append(r.groups, uint32(g))
		}
		r.groups = append(r.groups, r.gid)
		return r, nil
	}
	u, err := user.Lookup(serviceUser)
	if err != nil {
		return runAs{}, fmt.Errorf("strata runs as root, PostgreSQL refuses to, and there is no %q user to run it as (%v): "+
			"install Debian's postgresql (apt-get install -y postgresql), which creates it, or run strata as a non-root user", serviceUser, err)
	}
	return runAsUser(u)
}

func runAsUser(u *user.User) (runAs, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	if uid == 0 {
		return runAs{}, fmt.Errorf("user %s has uid 0: PostgreSQL refuses to run as root", u.Username)
	}
	r := runAs{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != r.gid {
				r.groups = append(r.groups, uint32(g))
			}
		}
	}
	r.cred = &syscall.Credential{Uid: r.uid, Gid: r.gid, Groups: slices.Clone(r.groups)}
	r.groups = append(r.groups, r.gid)
	return r, nil
}

// childEnv is the environment of initdb, pg_ctl and postgres: this process's, without the
// PG* variables (PGPORT, PGDATA, … would silently change what the commands do) and with HOME
// set to the user's when running as another user.
func (r runAs) childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || (r.cred != nil && strings.HasPrefix(kv, "HOME=")) {
			continue
		}
		env = append(env, kv)
	}
	if r.cred != nil && r.home != "" {
		env = append(env, "HOME="+r.home)
	}
	return env
}

// searchable reports whether r may traverse a directory with st's owner and mode.
func (r runAs) searchable(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := st.Mode().Perm()
	switch {
	case sys.Uid == r.uid:
		return perm&0o100 != 0
	case slices.Contains(r.groups, sys.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// checkReachable fails with one actionable error when r cannot traverse every directory
// from / down to dir (or to its deepest existing ancestor: whatever strata creates below that
// it makes traversable). Both the path as given and its symlink-resolved form are checked,
// since the server walks the one and the kernel the other.
func checkReachable(dir string, r runAs) error {
	existing := dir
	for {
		_, err := os.Stat(existing)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("data dir %s: %w", dir, err)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	paths := []string{existing}
	if real, err := filepath.EvalSymlinks(existing); err == nil && real != existing {
		paths = append(paths, real)
	}
	for _, p := range paths {
		var chain []string
		for q := p; ; q = filepath.Dir(q) {
			chain = append(chain, q)
			if filepath.Dir(q) == q {
				break
			}
		}
		slices.Reverse(chain)
		for _, q := range chain {
			st, err := os.Stat(q)
			if err != nil {
				return fmt.Errorf("data dir %s: %w", dir, err)
			}
			if !r.searchable(st) {
				return unreachableError(dir, q, st, r)
			}
		}
	}
	return nil
}

func unreachableError(dir, blocker string, st fs.FileInfo, r runAs) error {
	owner := "?"
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		owner = strconv.FormatUint(uint64(sys.Uid), 10)
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
	}
	why := ""
	if r.cred != nil {
		why = " (strata runs as root and PostgreSQL refuses to, so PostgreSQL runs as " + r.name + ")"
	}
	return fmt.Errorf("data dir %s is not reachable by user %s%s because %s is mode %04o owned by %s: "+
		"pass --data-dir under /var/lib/strata (the default for root) or another directory %s can reach, "+
		"or run strata as a non-root user", dir, r.name, why, blocker, st.Mode().Perm(), owner, r.name)
}

// mkdirAll is os.MkdirAll that reports the directories it created, outermost first, so that
// strata sets the mode and owner of those and of nothing else.
func mkdirAll(dir string, perm fs.FileMode) ([]string, error) {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	slices.Reverse(missing)
	var created []string
	for _, p := range missing {
		if err := os.Mkdir(p, perm); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue // created concurrently by someone else: not ours
			}
			return created, err
		}
		created = append(created, p)
	}
	return created, nil
}

// ensureOwnedDir makes dir a directory that exists, is no symlink, is owned by r and has
// mode perm. A directory strata creates gets that owner and mode; an existing one must
// already have them (strata never changes what it did not create).
func ensureOwnedDir(dir string, perm fs.FileMode, r runAs) error {
	err := os.Mkdir(dir, perm)
	if err == nil {
		if err := os.Chmod(dir, perm); err != nil { // undo the umask
			return err
		}
		if r.cred != nil {
			if err := os.Lchown(dir, int(r.uid), int(r.gid)); err != nil {
				return err
			}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s exists and is not a directory: remove it", dir)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if ok && sys.Uid != r.uid {
		return fmt.Errorf("%s is owned by uid %d, but PostgreSQL runs as %s (uid %d): remove it, or fix its owner", dir, sys.Uid, r.name, r.uid)
	}
	if st.Mode().Perm() != perm {
		return fmt.Errorf("%s has mode %04o, want %04o: remove it, or chmod %04o it", dir, st.Mode().Perm(), perm, perm)
	}
	return nil
}
