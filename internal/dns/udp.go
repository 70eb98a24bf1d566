package dns

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// maxUDPReaders bounds the goroutines reading the UDP socket.
const maxUDPReaders = 4

// udpLoop is the server's UDP side: readers on one socket, until closed.
type udpLoop struct {
	conn *net.UDPConn
	wg   sync.WaitGroup
}

// serveUDP starts reading queries from conn: up to GOMAXPROCS readers
// (at most maxUDPReaders), each answering what it reads.
func (s *Server) serveUDP(conn *net.UDPConn) *udpLoop {
	u := &udpLoop{conn: conn}
	for range min(runtime.GOMAXPROCS(0), maxUDPReaders) {
		u.wg.Go(func() { s.readUDP(conn) })
	}
	return u
}

// close stops the readers and waits for them; nil does nothing.
func (u *udpLoop) close() error {
	if u == nil {
		return nil
	}
	err := u.conn.Close()
	u.wg.Wait()
	return err
}

// udpBatch is how many datagrams a reader takes (recvmmsg) and answers
// from the cache (sendmmsg) in one system call each; udpBuffer is the
// largest query it reads whole (larger ones do not unpack: FORMERR).
const (
	udpBatch  = 32
	udpBuffer = 4096
)

// batchConn reads and writes datagrams in batches: ipv4's and ipv6's
// PacketConn.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func batchConnOf(conn *net.UDPConn) batchConn {
	if a, ok := conn.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		return ipv6.NewPacketConn(conn)
	}
	return ipv4.NewPacketConn(conn)
}

// readUDP answers the queries it reads from conn until conn is closed, a
// batch at a time: the cache's answers together, the others one by one.
func (s *Server) readUDP(conn *net.UDPConn) {
	bc := batchConnOf(conn)
	in, out := make([]ipv4.Message, udpBatch), make([]ipv4.Message, udpBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, udpBuffer)}
		out[i].Buffers = [][]byte{nil}
	}
	for {
		n, err := bc.ReadBatch(in, 0)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an ICMP error of an earlier reply, say
		}
		k := 0
		for i := range in[:n] {
			ua, ok := in[i].Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			src, q := ua.AddrPort(), in[i].Buffers[0][:in[i].N]
			if b, hit := s.cached(q, src, out[k].Buffers[0]); hit {
				out[k].Buffers[0], out[k].Addr = b, ua
				k++
				continue
			}
			s.packet(conn, q, src)
		}
		for sent := 0; sent < k; {
			m, err := bc.WriteBatch(out[sent:k], 0)
			if err != nil {
				break
			}
			sent += m
		}
	}
}

// cached is the answer the cache holds for query q from src, copied into
// dst with q's id: the same bytes from the same tenant at the table's
// generation. Packets that are no query (a reply's QR bit set, shorter
// than a header) are dropped without an answer: a server that answered
// replies could be made to loop.
func (s *Server) cached(q []byte, src netip.AddrPort, dst []byte) ([]byte, bool) {
	if len(q) < 12 || q[2]&0x80 != 0 {
		return nil, false
	}
	start := time.Now()
	gen := s.table.Generation()
	tenant, ok := s.cfg.Identify(src.Addr().Unmap())
	if !ok {
		return nil, false
	}
	b, result, hit := s.cache.get(tenant, q, gen, dst)
	if !hit {
		return nil, false
	}
	s.queries.Add(1)
	s.count(result)
	s.observe(result, start)
	return b, true
}

// packet answers one UDP query q from src that the cache does not hold:
// unpacked and answered by reply, on a goroutine of its own when it is
// forwarded (an upstream may take seconds). Packets that are no query
// are dropped (see cached).
func (s *Server) packet(conn *net.UDPConn, q []byte, src netip.AddrPort) {
	start := time.Now()
	if len(q) < 12 || q[2]&0x80 != 0 {
		return
	}
	s.queries.Add(1)
	gen := s.table.Generation()
	w := &udpWriter{conn: conn, src: src}
	req := new(mdns.Msg)
	if err := req.Unpack(q); err != nil {
		m := new(mdns.Msg)
		m.Id, m.Response, m.Rcode = uint16(q[0])<<8|uint16(q[1]), true, mdns.RcodeFormatError
		s.count(ResultFormErr)
		_ = w.WriteMsg(m)
		s.observe(ResultFormErr, start)
		return
	}
	size := udpSize(w, req)
	if req.Opcode == mdns.OpcodeQuery && len(req.Question) == 1 && !s.inZone(req) {
		go func() { s.observe(s.reply(w, req, size, nil, gen), start) }()
		return
	}
	s.observe(s.reply(w, req, size, q, gen), start)
}

// udpWriter is reply's writer of one UDP query's answer.
type udpWriter struct {
	conn *net.UDPConn
	src  netip.AddrPort
}

func (w *udpWriter) LocalAddr() net.Addr  { return w.conn.LocalAddr() }
func (w *udpWriter) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(w.src) }
func (w *udpWriter) WriteMsg(m *mdns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
func (w *udpWriter) Write(b []byte) (int, error) { return w.conn.WriteToUDPAddrPort(b, w.src) }
func (w *udpWriter) Close() error                { return nil }
func (w *udpWriter) TsigStatus() error           { return nil }
func (w *udpWriter) TsigTimersOnly(bool)         {}
func (w *udpWriter) Hijack()                     {}
