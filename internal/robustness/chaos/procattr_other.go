//go:build !linux

package chaos

import "syscall"

// replicaProcAttr is nil where there is no parent-death signal: a killed test run leaves its
// replicas running there.
func replicaProcAttr() *syscall.SysProcAttr { return nil }
