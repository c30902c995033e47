package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Lock is what a 423 (Locked) answer says about a Terraform/OpenTofu workspace lock: the
// workspace and the holder's LockInfo. The answer's body is the bare LockInfo that terraform
// and tofu expect, whose Path their http backend leaves empty, so the workspace is the one the
// request named (or, for a request about a whole project, the Path the server filled in).
type Lock struct {
	Project   string
	Workspace string
	Holder    LockInfo
}

// String is the conflict in words: which workspace, who holds it, doing what, since when.
func (l Lock) String() string {
	return fmt.Sprintf("%s/%s is locked by %s (lock ID %s, %s since %s)",
		l.Project, l.Workspace, orUnknown(l.Holder.Who), l.Holder.ID, orUnknown(l.Holder.Operation), l.Holder.Created.UTC().Format(time.RFC3339))
}

func orUnknown(s string) string {
	if s == "" {
		return "someone unknown"
	}
	return s
}

// LockOf returns the lock behind a 423 error of any call about a workspace or project.
func LockOf(err error) (Lock, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Lock == nil {
		return Lock{}, false
	}
	return *e.Lock, true
}

// lockOf reads a 423's LockInfo body; project and workspace come from the request's path
// (/v1/state/{project}/{workspace}…, or /v1/projects/{project}…) and from the holder's Path
// when the request named no workspace.
func lockOf(status int, path string, body []byte) *Lock {
	if status != http.StatusLocked || len(body) == 0 {
		return nil
	}
	var info LockInfo
	if json.Unmarshal(body, &info) != nil || info.ID == "" {
		return nil
	}
	l := &Lock{Holder: info}
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	unescape := func(s string) string {
		if u, err := url.PathUnescape(s); err == nil {
			return u
		}
		return s
	}
	switch {
	case len(seg) >= 4 && seg[0] == "v1" && seg[1] == "state":
		l.Project, l.Workspace = unescape(seg[2]), unescape(seg[3])
	case len(seg) >= 3 && seg[0] == "v1" && (seg[1] == "projects" || seg[1] == "state"):
		l.Project = strings.SplitN(unescape(seg[2]), ":", 2)[0]
	}
	if p, w, ok := strings.Cut(info.Path, "/"); ok && l.Workspace == "" && (l.Project == "" || l.Project == p) {
		l.Project, l.Workspace = p, w
	}
	return l
}
