package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/secret"
	"github.com/stratahq/strata/internal/tfstate"
)

// DecryptOptions say which state `strata state decrypt` reads, from where, and with which
// keys. It works without a running strata server, on purpose: an encrypted state must be
// readable when strata itself is down, including when the infrastructure strata runs on is
// managed by that very state.
type DecryptOptions struct {
	// Config reaches the database (DatabaseURL, Schema; or the embedded cluster of DataDir)
	// when Backup is empty.
	Config Config
	// Backup is a file made by `strata backup create` to read instead of a database.
	Backup string
	// KeyFiles are the key files to open the state with (any of them may hold its key).
	KeyFiles []string
	// KeyCommands fetch keys as serve's --encryption-key-command does.
	KeyCommands        []string
	Project, Workspace string
	// Version is the version to read; 0 the current state (or, when the workspace's row is
	// gone, its latest version).
	Version int64
}

// DecryptState reads a workspace's state (or one of its versions) from a database or a
// backup file and returns its plaintext; a plain state is returned as it is stored.
func DecryptState(ctx context.Context, opts DecryptOptions) ([]byte, error) {
	keys, err := secret.LoadKeys(ctx, opts.KeyCommands, opts.KeyFiles)
	if err != nil {
		return nil, err
	}
	schema := opts.Config.Schema
	if schema == "" {
		schema = db.DefaultSchema
	}
	if err := tfstate.ValidateProject(opts.Project, schema); err != nil {
		return nil, err
	}
	if err := tfstate.ValidateWorkspace(opts.Workspace); err != nil {
		return nil, err
	}
	var stored string
	if opts.Backup != "" {
		stored, err = storedFromBackup(ctx, opts.Backup, schema, opts.Project, opts.Workspace, opts.Version)
	} else {
		stored, err = storedFromDatabase(ctx, opts.Config, opts.Project, opts.Workspace, opts.Version)
	}
	if err != nil {
		return nil, err
	}
	plain, err := tfstate.OpenState(keys, opts.Project, opts.Workspace, stored)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", opts.Project, opts.Workspace, err)
	}
	return plain, nil
}

func storedFromDatabase(ctx context.Context, cfg Config, project, workspace string, version int64) (string, error) {
	d, _, err := backupTarget(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer d.Close(context.WithoutCancel(ctx))
	stored, err := tfstate.ReadStored(ctx, d.DB, project, workspace, version)
	if err != nil && version == 0 {
		// A deleted workspace keeps its versions: its latest one is the last state it had.
		if latest, lerr := tfstate.ReadStored(ctx, d.DB, project, workspace, -1); lerr == nil {
			return latest, nil
		}
	}
	return stored, err
}

// storedFromBackup reads the stored text from a backup's data with pg_restore, which writes
// a table's rows as COPY text: the states table of the project's schema for the current
// state, the project's tf_state_versions (older backups: strata's) for a version.
func storedFromBackup(ctx context.Context, file, schema, project, workspace string, version int64) (string, error) {
	pgRestore, err := pgTool("pg_restore")
	if err != nil {
		return "", err
	}
	read := func(schemaName, table string) (*copyTable, error) {
		out, err := exec.CommandContext(ctx, pgRestore, "--data-only", "--schema", schemaName, "--table", table, "--file", "-", file).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return nil, fmt.Errorf("pg_restore %s: %v: %s", file, err, bytes.TrimSpace(ee.Stderr))
			}
			return nil, fmt.Errorf("pg_restore %s: %w", file, err)
		}
		return parseCopy(out, table)
	}
	if version == 0 {
		states, err := read(project, "states")
		if err != nil {
			return "", err
		}
		for _, r := range states.rows {
			if name, ok := states.get(r, "name"); ok && name != nil && *name == workspace {
				if data, _ := states.get(r, "data"); data != nil {
					return *data, nil
				}
			}
		}
	}
	// Since migration 0034 a project's versions are in its own schema; a backup taken before
	// holds them in strata's, with a project column.
	versions, err := read(project, "tf_state_versions")
	if err != nil || len(versions.rows) == 0 {
		if versions, err = read(schema, "tf_state_versions"); err != nil {
			return "", err
		}
	}
	_, central := versions.cols["project"]
	best, bestN := "", int64(0)
	for _, r := range versions.rows {
		p := &project
		if central {
			p, _ = versions.get(r, "project")
		}
		w, _ := versions.get(r, "workspace")
		n, _ := versions.get(r, "n")
		data, _ := versions.get(r, "data")
		if p == nil || w == nil || n == nil || data == nil || *p != project || *w != workspace {
			continue
		}
		num, err := strconv.ParseInt(*n, 10, 64)
		if err != nil {
			continue
		}
		if (version > 0 && num == version) || (version == 0 && num > bestN) {
			best, bestN = *data, num
		}
	}
	if bestN == 0 {
		if version > 0 {
			return "", fmt.Errorf("the backup %s holds no version %d of %s/%s", file, version, project, workspace)
		}
		return "", fmt.Errorf("the backup %s holds no state of %s/%s", file, project, workspace)
	}
	return best, nil
}

// copyTable is one table's rows from COPY … FROM stdin text.
type copyTable struct {
	cols map[string]int
	rows [][]*string
}

func (c *copyTable) get(row []*string, col string) (*string, bool) {
	i, ok := c.cols[col]
	if !ok || i >= len(row) {
		return nil, false
	}
	return row[i], true
}

// parseCopy reads the COPY block of table from pg_restore's SQL output: the column list of
// its header, then a row per line (tab-separated, \N for NULL, backslash escapes) up to "\.".
func parseCopy(out []byte, table string) (*copyTable, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	var t *copyTable
	for sc.Scan() {
		line := sc.Text()
		if t == nil {
			if !strings.HasPrefix(line, "COPY ") || !strings.HasSuffix(line, " FROM stdin;") {
				continue
			}
			open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
			if open < 0 || end < open {
				return nil, fmt.Errorf("pg_restore: cannot read the columns of %q", line)
			}
			t = &copyTable{cols: map[string]int{}}
			for i, c := range strings.Split(line[open+1:end], ",") {
				t.cols[strings.Trim(strings.TrimSpace(c), `"`)] = i
			}
			continue
		}
		if line == `\.` {
			return t, nil
		}
		var row []*string
		for _, f := range strings.Split(line, "\t") {
			if f == `\N` {
				row = append(row, nil)
				continue
			}
			v := unescapeCopy(f)
			row = append(row, &v)
		}
		t.rows = append(t.rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if t == nil {
		return &copyTable{cols: map[string]int{}}, nil // the backup has no rows of the table
	}
	return nil, fmt.Errorf("pg_restore: the data of %s ends early", table)
}

// unescapeCopy undoes COPY text escaping: \b \f \n \r \t \v, \\, \digits (octal), \xHH.
func unescapeCopy(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x':
			j := i + 1
			for j < len(s) && j < i+3 && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('x')
				continue
			}
			v, _ := strconv.ParseUint(s[i+1:j], 16, 8)
			b.WriteByte(byte(v))
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 8)
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte(e)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
