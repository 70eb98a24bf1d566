package framework

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// HAProxyProc is what haproxy's master CLI says in "show proc".
type HAProxyProc struct {
	MasterPID int
	// Reloads is the master's reload counter, Failed its failed reloads.
	Reloads, Failed int
	Workers         []int
}

// HAProxyCLI sends one command to an haproxy CLI socket (the master
// socket or a stats socket) and returns the whole answer, as
// `echo cmd | socat - unix:sock` does.
func HAProxyCLI(sock, cmd string) (string, error) {
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", err
	}
	// The master CLI answers a client that is done talking.
	_ = conn.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(conn)
	return string(b), err
}

// HAProxyShowProc asks the master socket for "show proc":
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	1162            master          5 [failed: 0]   0d00h02m07s     2.6.12
//	# workers
//	1271            worker          0               0d00h00m00s     2.6.12
func HAProxyShowProc(masterSock string) (HAProxyProc, error) {
	out, err := HAProxyCLI(masterSock, "show proc")
	if err != nil {
		return HAProxyProc{}, fmt.Errorf("show proc on %s: %w", masterSock, err)
	}
	var p HAProxyProc
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		switch f[1] {
		case "master":
			p.MasterPID, p.Reloads = pid, mustAtoi(f[2])
			if len(f) >= 5 && f[3] == "[failed:" {
				p.Failed = mustAtoi(strings.TrimSuffix(f[4], "]"))
			}
		case "worker":
			p.Workers = append(p.Workers, pid)
		}
	}
	if p.MasterPID == 0 {
		return p, fmt.Errorf("show proc on %s: no master in %q", masterSock, out)
	}
	return p, nil
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// ReadPIDFile reads a pid file.
func ReadPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file %s: %w", path, err)
	}
	return pid, nil
}
