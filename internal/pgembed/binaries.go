package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MinMajorVersion is the oldest PostgreSQL major version strata runs on: its schema relies on
// PostgreSQL 15 (UNIQUE NULLS NOT DISTINCT, CREATE DATABASE … STRATEGY).
const MinMajorVersion = 15

// ErrNoBinaries means no PostgreSQL server binaries of a version strata supports were found;
// errors that wrap it say where strata looked and what it found.
var ErrNoBinaries = errors.New("no PostgreSQL 15+ server binaries (initdb, pg_ctl, postgres) found: " +
	"install Debian's postgresql (apt-get install -y postgresql) or pass --database-url")

// debianRoot is where Debian and Ubuntu install each PostgreSQL major version:
// /usr/lib/postgresql/<N>/bin, off PATH.
const debianRoot = "/usr/lib/postgresql"

// binaries is one directory holding initdb, pg_ctl and postgres of one version.
type binaries struct {
	dir     string // symlinks resolved
	major   int
	version string // as postgres --version prints it, e.g. "15.18"
}

// searchPaths says where findBinaries looks; tests replace it.
type searchPaths struct {
	path          string // a PATH list
	versionedRoot string // a directory of <N>/bin directories
}

func defaultSearch() searchPaths {
	return searchPaths{path: os.Getenv("PATH"), versionedRoot: debianRoot}
}

// FindBinaries returns the directory holding PostgreSQL's initdb, pg_ctl and postgres. It
// looks on PATH, then in the directory `pg_config --bindir` names, then in Debian's
// versioned directories /usr/lib/postgresql/<N>/bin (newest N first), and takes the first
// whose postgres is version 15 or newer. A PATH entry that is a symlink is resolved, because
// initdb and pg_ctl themselves look for postgres next to their resolved location. The error
// wraps ErrNoBinaries.
func FindBinaries() (bindir string, err error) {
	b, err := findBinaries(context.Background(), defaultSearch())
	if err != nil {
		return "", err
	}
	return b.dir, nil
}

func findBinaries(ctx context.Context, s searchPaths) (binaries, error) {
	var candidates []string
	for _, dir := range filepath.SplitList(s.path) {
		if dir == "" {
			continue
		}
		initdb := filepath.Join(dir, "initdb")
		if !isExecutable(initdb) {
			continue
		}
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	if pgConfig := lookPathIn("pg_config", s.path); pgConfig != "" {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(cctx, pgConfig, "--bindir").Output()
		cancel()
		if err == nil {
			candidates = append(candidates, strings.TrimSpace(string(out)))
		}
	}
	candidates = append(candidates, versionedDirs(s.versionedRoot)...)

	seen := map[string]bool{}
	var rejected []string
	for _, dir := range candidates {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		if seen[dir] {
			continue
		}
		seen[dir] = true
		b, err := inspectBinaries(ctx, dir)
		if err != nil {
			rejected = append(rejected, err.Error())
			continue
		}
		if b.major < MinMajorVersion {
			rejected = append(rejected, fmt.Sprintf("PostgreSQL %s in %s is too old (strata needs %d or newer)", b.version, dir, MinMajorVersion))
			continue
		}
		return b, nil
	}
	where := "searched PATH, pg_config --bindir and " + filepath.Join(s.versionedRoot, "*", "bin")
	if len(rejected) > 0 {
		return binaries{}, fmt.Errorf("%w (%s; rejected: %s)", ErrNoBinaries, where, strings.Join(rejected, "; "))
	}
	return binaries{}, fmt.Errorf("%w (%s)", ErrNoBinaries, where)
}

// binariesForMajor returns the binaries of exactly major from Debian's versioned directory,
// for a cluster created by an older PostgreSQL than the one found first.
func binariesForMajor(ctx context.Context, root string, major int) (binaries, error) {
	b, err := inspectBinaries(ctx, filepath.Join(root, strconv.Itoa(major), "bin"))
	if err != nil {
		return binaries{}, err
	}
	if b.major != major {
		return binaries{}, fmt.Errorf("%s holds PostgreSQL %s, not %d", b.dir, b.version, major)
	}
	return b, nil
}

// versionedDirs lists root/<N>/bin, highest N first.
func versionedDirs(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	type v struct {
		n   float64
		dir string
	}
	var vs []v
	for _, e := range entries {
		n, err := strconv.ParseFloat(e.Name(), 64) // "15", and old "9.6"
		if err != nil {
			continue
		}
		vs = append(vs, v{n, filepath.Join(root, e.Name(), "bin")})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].n > vs[j].n })
	dirs := make([]string, len(vs))
	for i, x := range vs {
		dirs[i] = x.dir
	}
	return dirs
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) ((\d+)[^\s]*)`)

// inspectBinaries checks that dir holds the three programs and asks postgres its version
// (postgres answers --version even as root; it refuses root only when it would serve).
func inspectBinaries(ctx context.Context, dir string) (binaries, error) {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if !isExecutable(filepath.Join(dir, name)) {
			return binaries{}, fmt.Errorf("%s has no %s", dir, name)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(cctx, filepath.Join(dir, "postgres"), "--version")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return binaries{}, fmt.Errorf("%s --version: %v: %s", filepath.Join(dir, "postgres"), err, strings.TrimSpace(out.String()))
	}
	m := versionRE.FindStringSubmatch(out.String())
	if m == nil {
		return binaries{}, fmt.Errorf("%s --version: cannot read version from %q", filepath.Join(dir, "postgres"), strings.TrimSpace(out.String()))
	}
	major, _ := strconv.Atoi(m[2])
	return binaries{dir: dir, major: major, version: m[1]}, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// lookPathIn is exec.LookPath over an explicit PATH list.
func lookPathIn(name, pathList string) string {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	return ""
}
