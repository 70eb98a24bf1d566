package provider

import "syscall"

// socketControl sets the socket's mode before bind creates its file, so
// that there is no moment at which another user could connect (Linux
// gives the new file the mode of the socket's inode, less the umask).
func socketControl(_, _ string, c syscall.RawConn) error {
	var chmodErr error
	if err := c.Control(func(fd uintptr) { chmodErr = syscall.Fchmod(int(fd), 0o600) }); err != nil {
		return err
	}
	return chmodErr
}

// pluginSysProcAttr makes a plugin die with the agent: the kernel sends it
// SIGKILL when the agent goes away, even on a crash or SIGKILL of the
// agent, so that no plugin outlives it holding a socket or replicas.
//
// Pdeathsig fires when the OS thread that started the child exits, not
// the process. The Go runtime only ends threads that a goroutine locked
// and left locked, and such threads run no other goroutine, so the thread
// that runs exec here lives as long as the agent.
func pluginSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
