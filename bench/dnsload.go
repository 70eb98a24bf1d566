package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	mdns "github.com/miekg/dns"
	"golang.org/x/net/ipv4"

	"github.com/stratahq/strata/internal/dns"
)

// DNS1's records: the name a replica asks, its answer (three ready
// replicas), and the addresses of the two ends of the path.
const (
	dnsServerIP = "10.53.0.1"
	dnsClientIP = "10.53.0.2"
	dnsName     = "web.acme.eu.strata.internal."
)

var dnsAnswers = []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}

// dnsSubcommand runs the hidden modes DNS1 starts its processes in
// (`bench serve-dns ADDR`, `bench dns-load ...`) and reports whether args
// named one.
func dnsSubcommand(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "serve-dns":
		serveDNS(args[1:])
	case "dns-load":
		dnsLoad(args[1:])
	default:
		return false
	}
	return true
}

// serveDNS serves DNS1's records with the agent's name server
// (internal/dns, as the agent runs it) on addr until SIGTERM. The asking
// replica is in the table, so that the server tells its tenant from the
// query's source address, as on a node.
func serveDNS(args []string) {
	if len(args) != 1 {
		log.Fatal("usage: bench serve-dns ADDR")
	}
	eps := []dns.Endpoint{{ID: "client-1", Tenant: "acme", Region: "eu", Resource: "client", Addr: netip.MustParseAddr(dnsClientIP), Ready: true}}
	for i, a := range dnsAnswers {
		eps = append(eps, dns.Endpoint{ID: fmt.Sprintf("web-%d", i+1), Tenant: "acme", Region: "eu", Resource: "web",
			Addr: netip.MustParseAddr(a), Ready: true, Ports: []dns.Port{{Name: "http", Proto: "tcp", Port: 8080}}})
	}
	t := dns.NewTable()
	t.Reset(eps)
	s := dns.NewServer(dns.Config{Region: "eu"}, t)
	if err := s.Listen(args[0]); err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving", s.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	_ = s.Close()
}

// loadCounts is what a load run got.
type loadCounts struct{ answers, timeouts, wrong int }

func (c *loadCounts) add(o loadCounts) {
	c.answers += o.answers
	c.timeouts += o.timeouts
	c.wrong += o.wrong
}

// dnsLoad is DNS1's load generator, run in the client's namespace: conc
// queries kept in flight (closed loop: a new one for each answer) for
// warm, then for dur, counting the answers (NOERROR with every record), timeouts
// (no answer in 1 s) and wrong answers; and the CPU time the server's
// process (pid) and its own used in the measured window, from /proc.
func dnsLoad(args []string) {
	fs := flag.NewFlagSet("dns-load", flag.ExitOnError)
	addr := fs.String("addr", net.JoinHostPort(dnsServerIP, "53"), "server")
	conc := fs.Int("conc", 32, "queries in flight")
	dur := fs.Duration("dur", 5*time.Second, "measured time")
	warm := fs.Duration("warm", time.Second, "unmeasured load first")
	pid := fs.Int("pid", 0, "the server's process id")
	_ = fs.Parse(args)
	q := new(mdns.Msg).SetQuestion(dnsName, mdns.TypeA)
	query, err := q.Pack()
	if err != nil {
		log.Fatal(err)
	}
	if err := dnsWaitReady(*addr, query); err != nil {
		log.Fatal(err)
	}
	runLoad(*addr, query, *conc, *warm)
	self := os.Getpid()
	cpu0, err := procCPUSeconds(*pid)
	if err != nil {
		log.Fatal(err)
	}
	own0, _ := procCPUSeconds(self)
	began := time.Now()
	c := runLoad(*addr, query, *conc, *dur)
	secs := time.Since(began).Seconds()
	cpu1, err := procCPUSeconds(*pid)
	if err != nil {
		log.Fatal(err)
	}
	own1, _ := procCPUSeconds(self)
	fmt.Printf("dnsload answers=%d timeouts=%d wrong=%d secs=%.3f cpu=%.3f loadcpu=%.3f\n", c.answers, c.timeouts, c.wrong, secs, cpu1-cpu0, own1-own0)
}

// dnsWaitReady asks until the server answers, for 10 s at most.
func dnsWaitReady(addr string, query []byte) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c := runLoad(addr, query, 1, 0)
		if c.answers > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no answer from %s in 10 s", addr)
}

// dnsSockets is how many sockets the load generator spreads its queries
// in flight over, one goroutine each.
const dnsSockets = 4

// runLoad is conc queries kept in flight (closed loop) over dnsSockets
// sockets for d (at least one query each).
func runLoad(addr string, query []byte, conc int, d time.Duration) loadCounts {
	end := time.Now().Add(d)
	var mu sync.Mutex
	var total loadCounts
	var wg sync.WaitGroup
	socks := min(conc, dnsSockets)
	for g := range socks {
		inflight := conc / socks
		if g < conc%socks {
			inflight++
		}
		wg.Go(func() {
			c := loadClient(addr, query, inflight, uint16(g)<<12, end)
			mu.Lock()
			total.add(c)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// loadSocket is one socket of the load generator with its queries in
// flight. It sends and reads in batches (sendmmsg, recvmmsg), so that
// the generator's system calls cost less than the server's.
type loadSocket struct {
	conn    *net.UDPConn
	pc      *ipv4.PacketConn
	out, in []ipv4.Message
	pending map[uint16]bool
	next    uint16
	c       loadCounts
}

// loadClient keeps inflight queries outstanding on a socket of its own
// until end, then waits for the last answers.
func loadClient(addr string, query []byte, inflight int, base uint16, end time.Time) loadCounts {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return loadCounts{wrong: inflight}
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return loadCounts{wrong: inflight}
	}
	defer conn.Close()
	l := &loadSocket{conn: conn, pc: ipv4.NewPacketConn(conn), pending: map[uint16]bool{}, next: base}
	for range inflight {
		l.out = append(l.out, ipv4.Message{Buffers: [][]byte{append([]byte(nil), query...)}})
		l.in = append(l.in, ipv4.Message{Buffers: [][]byte{make([]byte, 1500)}})
	}
	l.send(inflight)
	for len(l.pending) > 0 {
		k := l.read()
		if time.Now().Before(end) {
			l.send(k)
		}
	}
	return l.c
}

// send sends k new queries.
func (l *loadSocket) send(k int) {
	for i := range k {
		l.next++
		binary.BigEndian.PutUint16(l.out[i].Buffers[0], l.next)
		l.pending[l.next] = true
	}
	for sent := 0; sent < k; {
		n, err := l.pc.WriteBatch(l.out[sent:k], 0)
		if err != nil {
			// Not sent: an error each.
			for i := sent; i < k; i++ {
				delete(l.pending, binary.BigEndian.Uint16(l.out[i].Buffers[0]))
			}
			l.c.wrong += k - sent
			return
		}
		sent += n
	}
}

// read reads a batch of answers and returns how many of them answered
// queries in flight; after 1 s without any, every query in flight is a
// timeout (and as many new ones are due). Late answers to queries
// already counted as timeouts are skipped.
func (l *loadSocket) read() int {
	_ = l.conn.SetReadDeadline(time.Now().Add(time.Second))
	n, err := l.pc.ReadBatch(l.in, 0)
	if err != nil {
		k := len(l.pending)
		l.c.timeouts += k
		clear(l.pending)
		return k
	}
	k := 0
	for _, m := range l.in[:n] {
		b := m.Buffers[0][:m.N]
		if len(b) < 12 || !l.pending[binary.BigEndian.Uint16(b)] {
			continue
		}
		delete(l.pending, binary.BigEndian.Uint16(b))
		k++
		qr, rcode := b[2]&0x80 != 0, b[3]&0x0f
		if qr && rcode == mdns.RcodeSuccess && int(binary.BigEndian.Uint16(b[6:])) == len(dnsAnswers) {
			l.c.answers++
		} else {
			l.c.wrong++
		}
	}
	return k
}

// procCPUSeconds is the user + system CPU time of process pid, from
// /proc/<pid>/stat (clock ticks of 1/100 s).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	// After the command: state is field 3, utime 14, stime 15.
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return (ut + st) / 100, nil
}
