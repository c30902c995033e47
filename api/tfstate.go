package api

import "time"

// LockInfo is Terraform's and OpenTofu's lock description, as their http backend sends it in
// LOCK and UNLOCK bodies and expects it back in a 423 (Locked) answer. The JSON keys are
// the Go field names of Terraform's statemgr.LockInfo, which has no tags: clients unmarshal
// the holder's lock from a conflict answer and fail on anything else.
type LockInfo struct {
	// ID is the lock's identity; a write (POST ?ID=) and an UNLOCK must present it.
	ID string `json:"ID"`
	// Operation is what the holder is doing, e.g. OperationTypeApply.
	Operation string `json:"Operation"`
	// Info is free text from the holder.
	Info string `json:"Info"`
	// Who is user@host of the holder.
	Who string `json:"Who"`
	// Version is the holder's Terraform or OpenTofu version.
	Version string `json:"Version"`
	// Created is when the lock was taken.
	Created time.Time `json:"Created"`
	// Path is the locked state's path; Terraform's http backend leaves it empty.
	Path string `json:"Path"`
}

// Project is a Terraform/OpenTofu project: a PostgreSQL schema holding the pg backend's
// states table, one row per workspace.
type Project struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy"`
	// Adopted is true when the schema existed before strata managed it.
	Adopted bool `json:"adopted"`
	// Workspaces counts workspaces with a state.
	Workspaces int `json:"workspaces"`
	// CredentialsRole is the login role made for pg clients, when one was made.
	CredentialsRole string `json:"credentialsRole,omitempty"`
	// Encryption is true for a project whose states are stored encrypted (sealed with the
	// server's encryption key). Such a project is served through the HTTP backend only: the
	// pg backend would read ciphertext. In a PUT body, true creates the project encrypted.
	Encryption bool `json:"encryption"`
	// Unavailable, in a project list, says why the project's workspaces could not be
	// counted: on Citus, the node holding the project does not answer (Workspaces is 0 then).
	// The other projects are listed as usual.
	Unavailable string `json:"unavailable,omitempty"`
}

// ProjectEncryption reports one step of converting a project to encryption
// (POST /v1/projects/{project}/encrypt): how many states and versions this call sealed and
// how many are still plain. The conversion is done when Remaining is 0.
type ProjectEncryption struct {
	Project   string `json:"project"`
	Converted int    `json:"converted"`
	Remaining int64  `json:"remaining"`
	Done      bool   `json:"done"`
}

// ProjectCredentials is what `strata project credentials` prints: a database role that can
// use only the project's states table, and a ready backend "pg" configuration.
type ProjectCredentials struct {
	Project  string `json:"project"`
	Role     string `json:"role"`
	Password string `json:"password"`
	// ConnStr is a conn_str for backend "pg" (it holds the password).
	ConnStr string `json:"connStr"`
	// Backend is a terraform { backend "pg" { … } } block to paste.
	Backend string `json:"backend"`
}

// Workspace is one state in a project, with its lock holder when locked.
type Workspace struct {
	Name string `json:"name"`
	// Size is the state's size in bytes (0 while a lock holds a placeholder).
	Size int64 `json:"size"`
	// Serial and Lineage come from the state; absent when it cannot be read (encrypted).
	Serial  *int64 `json:"serial,omitempty"`
	Lineage string `json:"lineage,omitempty"`
	// Version is strata's latest version number of the state (0: none recorded).
	Version   int64      `json:"version"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	// Placeholder is true when the workspace has no state yet, only a lock that reserved it.
	Placeholder bool        `json:"placeholder,omitempty"`
	Lock        *LockStatus `json:"lock,omitempty"`
}

// LockStatus says whether and by whom a workspace is locked: an HTTP client (Info is its
// LockInfo) or a pg backend client holding the workspace's advisory key (PG describes the
// holding PostgreSQL backend).
type LockStatus struct {
	Locked bool `json:"locked"`
	// Kind is "http" or "pg" when locked.
	Kind string    `json:"kind,omitempty"`
	Info *LockInfo `json:"info,omitempty"`
	PG   *PGHolder `json:"pg,omitempty"`
	// Protected is true when an HTTP lock also holds the workspace's advisory key, so pg
	// clients are kept out too.
	Protected bool `json:"protected"`
	// Since is when the lock was taken (for pg holders: as near as PostgreSQL tells).
	Since *time.Time `json:"since,omitempty"`
	// UnprotectedSince is when the lock keeper lost (or could not take) the lock's advisory
	// key, while it is lost: a pg client may have held the workspace since then.
	UnprotectedSince *time.Time `json:"unprotectedSince,omitempty"`
	// LastGap is the last window in which the lock was unprotected and that has ended (the key
	// was taken back and verified), for an operator to check what pg clients did meanwhile.
	LastGap *LockGap `json:"lastGap,omitempty"`
}

// LockGap is a window in which an HTTP lock did not hold its workspace's advisory key.
type LockGap struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// PGHolder describes a PostgreSQL backend holding a pg backend advisory key.
type PGHolder struct {
	PID             int       `json:"pid"`
	User            string    `json:"user,omitempty"`
	ClientAddr      string    `json:"clientAddr,omitempty"`
	ApplicationName string    `json:"applicationName,omitempty"`
	Since           time.Time `json:"since"`
	// Key is the advisory key held: the row id, or a workspace-creation key (≤ 0).
	Key int64 `json:"key"`
}

// StateVersion is one recorded state of a workspace.
type StateVersion struct {
	// N is strata's version number, increasing per workspace.
	N       int64  `json:"n"`
	Serial  *int64 `json:"serial,omitempty"`
	Lineage string `json:"lineage,omitempty"`
	// MD5 is the hex MD5 of the state's bytes.
	MD5  string `json:"md5"`
	Size int64  `json:"size"`
	// Source is how it was written: http, pg (a pg backend client), restore or adopt.
	Source    string    `json:"source"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// ProjectList is a page of GET /v1/projects.
type ProjectList struct {
	Items []Project `json:"items"`
	// Continue, when set, is passed as ?continue= to get the next page.
	Continue string `json:"continue,omitempty"`
}

// WorkspaceList is GET /v1/state/{project}: a page of workspaces in byte order of names.
type WorkspaceList struct {
	Items []Workspace `json:"items"`
	// Continue, when set, is passed as ?continue= to get the next page.
	Continue string `json:"continue,omitempty"`
}

// WriteResult is the answer to a state write.
type WriteResult struct {
	// Version is strata's version number of the state now stored.
	Version int64 `json:"version"`
	// Unchanged is true when the same bytes were already stored (nothing was written).
	Unchanged bool `json:"unchanged"`
}
