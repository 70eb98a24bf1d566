package main

import (
	"bufio"
	"net"
	"testing"
)

// statHeader is the start of haproxy 2.6's "show stat" header.
const statHeader = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,\n"

// serveStat answers every "show stat" on the balancer name's socket with
// body, as haproxy's runtime API does (one command, then close).
func serveStat(t *testing.T, c *cluster, name, body string) {
	t.Helper()
	l, err := net.Listen("unix", c.lbSocket(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if line, err := bufio.NewReader(conn).ReadString('\n'); err == nil && line == "show stat\n" {
				_, _ = conn.Write([]byte(body))
			}
			conn.Close()
		}
	}()
}

func TestLBServing(t *testing.T) {
	row := func(px, sv, status string) string {
		return px + "," + sv + ",0,0,0,0,,0,0,0,,0,,0,0,0,0," + status + ",\n"
	}
	for _, tc := range []struct {
		what, body string
		serving    bool
	}{
		{"up in every frontend", statHeader + row("f0", "FRONTEND", "OPEN") + row("f0", "r1", "UP") + row("f0", "r2", "UP") + row("f1", "r2", "UP") + row("f0", "BACKEND", "UP") + "\n", true},
		{"rising", statHeader + row("f0", "r2", "DOWN 1/2") + row("f1", "r2", "UP"), false},
		{"up in one frontend only", statHeader + row("f0", "r2", "UP") + row("f1", "r2", "DOWN"), false},
		{"not a server", statHeader + row("f0", "r1", "UP"), false},
		{"no answer", "", false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c := &cluster{s: &suite{dir: t.TempDir()}, name: "t"}
			serveStat(t, c, "lb", tc.body)
			if err := c.lbServing("lb", 1); (err == nil) != tc.serving {
				t.Fatalf("lbServing(r2): got %v; want serving %v", err, tc.serving)
			}
		})
	}
}
