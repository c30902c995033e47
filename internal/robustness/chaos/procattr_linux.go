package chaos

import "syscall"

// replicaProcAttr makes a replica die with the process that started it (a killed test run),
// where the kernel offers that: Linux's parent-death signal.
func replicaProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
