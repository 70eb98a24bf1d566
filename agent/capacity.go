package agent

import (
	"bufio"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/stratahq/strata/internal/api"
)

// nodeCapacity picks each dimension from the configuration, else from the
// first provider that knows better than the agent, else from the machine.
// c is the configured capacity; dataDir the file system whose free space
// is the disk.
func nodeCapacity(c api.Capacity, dataDir string, provs *providerSet, log *slog.Logger) api.Capacity {
	for _, e := range provs.list {
		if pc := e.info.Capacity; pc != nil {
			c = fillCapacity(c, *pc)
			break
		}
	}
	if c.MilliCPU == 0 {
		c.MilliCPU = int64(runtime.NumCPU()) * 1000
	}
	if c.MemoryMiB == 0 {
		if m, err := memTotalMiB("/proc/meminfo"); err == nil {
			c.MemoryMiB = m
		} else {
			log.Warn("cannot detect memory; set node.memoryMiB", "err", err)
		}
	}
	if c.DiskMiB == 0 {
		if d, err := freeDiskMiB(dataDir); err == nil {
			c.DiskMiB = d
		} else {
			log.Warn("cannot detect free disk; set node.diskMiB", "dir", dataDir, "err", err)
		}
	}
	return c
}

// fillCapacity fills the zero dimensions of c from o.
func fillCapacity(c, o api.Capacity) api.Capacity {
	if c.MilliCPU == 0 {
		c.MilliCPU = o.MilliCPU
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = o.MemoryMiB
	}
	if c.DiskMiB == 0 {
		c.DiskMiB = o.DiskMiB
	}
	return c
}

// memTotalMiB reads MemTotal from a meminfo file.
func memTotalMiB(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb / 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, os.ErrNotExist
}

// freeDiskMiB is the space available to unprivileged users on the file
// system holding dir, or its nearest existing parent (the data dir may
// not exist yet on a fresh node).
func freeDiskMiB(dir string) (int64, error) {
	if dir == "" {
		dir = "."
	}
	dir = filepath.Clean(dir)
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize) >> 20, nil
		}
		parent := filepath.Dir(dir)
		if !os.IsNotExist(err) || parent == dir {
			return 0, err
		}
		dir = parent
	}
}
