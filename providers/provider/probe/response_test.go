package probe

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// rawServer answers every connection with resp, then holds it open
// until the client closes it (a server that ignores Connection: close)
// or, with closeAfter, closes it.
func rawServer(t *testing.T, resp string, closeAfter bool) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				_, _ = c.Write([]byte(resp))
				if closeAfter {
					return
				}
				_, _ = br.ReadByte() // until the client closes
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func TestHTTPResponses(t *testing.T) {
	long := strings.Repeat("a", 5000)
	for _, tc := range []struct {
		name       string
		resp       string
		closeAfter bool
		want       Result
		msg        string
	}{
		{name: "content-length, connection kept open", resp: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", want: Success},
		{name: "no body, connection kept open", resp: "HTTP/1.1 204 No Content\r\n\r\n", want: Success},
		{name: "chunked, connection kept open", resp: "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", want: Failure, msg: "statuscode: 500"},
		{name: "framed by close", resp: "HTTP/1.0 200 OK\r\n\r\nbody until the end", closeAfter: true, want: Success},
		{name: "no reason phrase", resp: "HTTP/1.1 302\r\nContent-Length: 0\r\n\r\n", want: Success},
		{name: "continue first", resp: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", want: Failure, msg: "statuscode: 503"},
		{name: "lower-case fields, LF only", resp: "HTTP/1.1 200 OK\ncontent-length: 2\n\nok", want: Success},
		{name: "not HTTP", resp: "SSH-2.0-OpenSSH_9.6\r\n", closeAfter: true, want: Failure, msg: "malformed HTTP response"},
		{name: "bad status", resp: "HTTP/1.1 2x0 OK\r\n\r\n", closeAfter: true, want: Failure, msg: "malformed"},
		{name: "bad content-length", resp: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", want: Failure, msg: "Content-Length"},
		{name: "truncated head", resp: "HTTP/1.1 200 OK\r\nContent-", closeAfter: true, want: Failure, msg: "unexpected EOF"},
		{name: "truncated body", resp: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", closeAfter: true, want: Failure, msg: "EOF"},
		{name: "header line too long", resp: "HTTP/1.1 200 OK\r\nX-Long: " + long + "\r\n\r\n", closeAfter: true, want: Failure, msg: "header line longer"},
		{name: "empty", resp: "", closeAfter: true, want: Failure, msg: "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := rawServer(t, tc.resp, tc.closeAfter)
			a := &api.HTTPGetAction{Path: "/", Port: port, Scheme: api.SchemeHTTP}
			p, err := newHTTPProber(a, "127.0.0.1", "ua", dialDirect, false)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, msg := probeOnce(t, p, 3*time.Second)
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %s %q; want %s with %q", got, msg, tc.want, tc.msg)
			}
			// A server that keeps the connection open is not waited for.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the check took %v", d)
			}
		})
	}
}

func TestParseStatusLine(t *testing.T) {
	for line, want := range map[string]int{
		"HTTP/1.1 200 OK": 200, "HTTP/1.0 404 Not Found": 404, "HTTP/1.1 503": 503, "HTTP/2 204 ": 204,
		"HTTP/1.1 20": -1, "HTTP/1.1 2000 OK": -1, "http/1.1 200 OK": -1, "HTTP/1.1": -1, "": -1, "HTTP/1.1 -20 x": -1,
	} {
		got, err := parseStatusLine([]byte(line))
		if err != nil {
			got = -1
		}
		if got != want {
			t.Errorf("parseStatusLine(%q) = %d, %v; want %s", line, got, err, strconv.Itoa(want))
		}
	}
}
