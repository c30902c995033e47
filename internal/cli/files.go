package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Local files of pillar imports and exports (issue 27, finding 8e). A pillar tree may be a
// directory other people can write to (a checkout, a shared /srv), and an export may go into
// one. So a tree is read without following symbolic links unless the operator asks to
// (--follow-symlinks): a link named key.sls pointing at ~/.ssh/id_rsa would otherwise upload
// the key as a pillar row, or quote it in an error. And an export never writes through a
// link: each file is created exclusively (O_EXCL, O_NOFOLLOW) under DIR opened as an
// os.Root, a link where a directory of the tree belongs is refused, and --force replaces a
// file by removing it first — so a link planted in DIR, before or during the export, makes
// it fail or is replaced, and its target is never touched.

// errSymlink names a link the import would have followed, and the flag that allows it.
func errSymlink(p string) error {
	return fmt.Errorf("%s is a symbolic link: strata pillar import does not follow links in the tree (one could upload a file from outside it, such as a private key); replace it by the file or directory, or give --follow-symlinks", p)
}

// treeFile is one SLS file of a pillar tree: its path relative to the tree's root (slash
// separated, as the API names it) and on disk.
type treeFile struct {
	rel, path string
}

// slsFiles returns the .sls files under root, in lexical order. root itself is taken as
// named (it may be a link to the tree: the operator named it). Inside it, a symbolic link is
// an error naming it unless follow; with follow, links are followed, and a directory reached
// again through a link (a loop) is an error naming the link.
func slsFiles(root string, follow bool) ([]treeFile, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: give the pillar tree's directory (the one holding top.sls)", root)
	}
	var out []treeFile
	// walk reads dir; open holds the directories being walked (by their resolved path) to
	// tell a loop of links from a directory linked twice.
	var walk func(dir, rel string, open map[string]bool) error
	walk = func(dir, rel string, open map[string]bool) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p, r := filepath.Join(dir, e.Name()), path.Join(rel, e.Name())
			isDir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 {
				if !follow {
					return errSymlink(p)
				}
				fi, err := os.Stat(p)
				if err != nil {
					return fmt.Errorf("following the link %s: %w", p, err)
				}
				if !fi.IsDir() && !fi.Mode().IsRegular() {
					continue
				}
				isDir = fi.IsDir()
			}
			if isDir {
				real, err := filepath.EvalSymlinks(p)
				if err != nil {
					return err
				}
				if open[real] {
					return fmt.Errorf("%s leads back to %s (a loop of symbolic links)", p, real)
				}
				open[real] = true
				err = walk(p, r, open)
				delete(open, real)
				if err != nil {
					return err
				}
				continue
			}
			if strings.HasSuffix(e.Name(), ".sls") && (e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0) {
				out = append(out, treeFile{rel: r, path: p})
			}
		}
		return nil
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	if err := walk(root, "", map[string]bool{real: true}); err != nil {
		return nil, err
	}
	return out, nil
}

// treeReader reads the files of a pillar tree. Without follow it reads them through the
// tree's root opened as an os.Root and with O_NOFOLLOW: a file or directory swapped for a
// link after slsFiles looked at it is refused, never followed out of the tree.
type treeReader struct {
	root   *os.Root
	dir    string
	follow bool
}

func openTree(dir string, follow bool) (*treeReader, error) {
	if follow {
		return &treeReader{dir: dir, follow: true}, nil
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &treeReader{root: r, dir: dir}, nil
}

// read returns the file at rel (slash separated, relative to the tree's root).
func (t *treeReader) read(rel string) ([]byte, error) {
	p := filepath.Join(t.dir, filepath.FromSlash(rel))
	if t.follow {
		return os.ReadFile(p)
	}
	f, err := t.root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || isRootEscape(err) {
			return nil, errSymlink(p)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return io.ReadAll(f)
}

// exists reports whether rel is in the tree; a link there is an error unless follow.
func (t *treeReader) exists(rel string) (bool, error) {
	p := filepath.Join(t.dir, filepath.FromSlash(rel))
	var (
		fi  fs.FileInfo
		err error
	)
	if t.follow {
		fi, err = os.Stat(p)
	} else {
		fi, err = t.root.Lstat(filepath.FromSlash(rel))
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, errSymlink(p)
	}
	return true, nil
}

func (t *treeReader) close() {
	if t.root != nil {
		t.root.Close()
	}
}

// isRootEscape reports an os.Root refusing a path that leaves it (through a link).
func isRootEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// exportDir is the directory an export writes into, opened as an os.Root so that no path
// under it resolves outside it.
type exportDir struct {
	dir     string
	root    *os.Root
	force   bool
	created bool // made by this export (removed again when the export fails before writing)
}

// openExportDir makes dir for an export: a new directory (os.Mkdir, so it cannot already
// exist when it is made), or an existing empty one — or, with force, any existing directory.
// dir itself must not be a symbolic link. Anything planted in dir once it is checked cannot
// be written through: every file is created exclusively.
func openExportDir(dir string, force bool) (*exportDir, error) {
	created := true
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		// Its parent is missing: make the parents (the operator's path), then DIR itself.
		if err = os.MkdirAll(filepath.Dir(dir), 0o700); err == nil {
			err = os.Mkdir(dir, 0o700)
		}
	}
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		created = false
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symbolic link: export into the directory itself (an export never writes through links)", dir)
	case !fi.IsDir():
		return nil, fmt.Errorf("%s exists and is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	// dir swapped for a link between the Lstat and the open: refuse rather than write there.
	if rfi, err := root.Stat("."); err != nil || !os.SameFile(fi, rfi) {
		root.Close()
		return nil, fmt.Errorf("%s changed while the export opened it", dir)
	}
	if !created && !force {
		f, err := root.Open(".")
		if err != nil {
			root.Close()
			return nil, err
		}
		names, err := f.Readdirnames(1)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			root.Close()
			return nil, err
		}
		if len(names) > 0 {
			root.Close()
			return nil, fmt.Errorf("%s is not empty: export into a new directory (or give --force to overwrite the files the export writes)", dir)
		}
	}
	return &exportDir{dir: dir, root: root, force: force, created: created}, nil
}

// abandon closes the directory and removes it if this export made it and wrote nothing.
func (e *exportDir) abandon() {
	e.root.Close()
	if e.created {
		_ = os.Remove(e.dir)
	}
}

func (e *exportDir) close() error { return e.root.Close() }

// write creates the file rel (slash separated, local) with b, owner-only: its directories
// are made as needed and must not be links; an existing file is replaced only with force.
func (e *exportDir) write(rel string, b []byte) error {
	name := filepath.FromSlash(rel)
	if !filepath.IsLocal(name) {
		return fmt.Errorf("the server sent a file outside the tree: %q", rel)
	}
	// Each directory of the path, from the top: made, or an existing real directory.
	parts := strings.Split(filepath.Dir(name), string(filepath.Separator))
	for i := range parts {
		if parts[0] == "." {
			break
		}
		d := filepath.Join(parts[:i+1]...)
		err := e.root.Mkdir(d, 0o700)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err := e.root.Lstat(d)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: an export never writes through links (remove it)", filepath.Join(e.dir, d))
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", filepath.Join(e.dir, d))
		}
	}
	if e.force {
		// Replace what is there (a link: the link, not its target).
		if err := e.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replacing %s: %w", filepath.Join(e.dir, name), err)
		}
	}
	return writeExclusive(func() (*os.File, error) {
		return e.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	}, filepath.Join(e.dir, name), b)
}

// createExclusive makes the file path (a new file, or with force one replacing what is
// there, a link included) owner-only, never following a link; it returns the file to write.
func createExclusive(p string, force bool) (*os.File, error) {
	if force {
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil, fmt.Errorf("%s is a directory: name a file", p)
		case err == nil:
			if err := os.Remove(p); err != nil {
				return nil, err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s exists: name a new file (or give --force to overwrite it)", p)
	}
	return f, err
}

// writeExclusive writes b into the file open creates, naming p in its errors.
func writeExclusive(open func() (*os.File, error), p string, b []byte) error {
	f, err := open()
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while the export wrote the tree: an export never writes over a file it did not replace (run it again)", p)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
