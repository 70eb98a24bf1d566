//go:build !linux

package provider

import "syscall"

// socketControl does nothing here: Serve sets the mode after bind.
func socketControl(_, _ string, _ syscall.RawConn) error { return nil }

// pluginSysProcAttr has no parent-death signal outside Linux; a plugin
// outlives a crashed agent there (Strata's nodes run Linux).
func pluginSysProcAttr() *syscall.SysProcAttr { return nil }
