package netplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

var _ PolicyKernel = (*Netlink)(nil)

// digestMark starts the comment of the forward chain's first rule, which
// records the ruleset's digest.
const digestMark = "ruleset "

// elementChunk bounds the elements of one netlink message: an element
// list is one netlink attribute, whose length is 16 bits.
const elementChunk = 1024

func (k *Netlink) PolicyDigest(table string) (string, bool, error) {
	c, err := k.nft()
	if err != nil {
		return "", false, err
	}
	t, err := c.ListTableOfFamily(table, nftables.TableFamilyIPv4)
	if errors.Is(err, unix.ENOENT) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	ch, err := chainOf(c, t, ChainForward)
	if err != nil || ch == nil {
		return "", false, err
	}
	rules, err := c.GetRules(t, ch)
	if err != nil || len(rules) == 0 {
		return "", false, err
	}
	comment, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment)
	_, d, ok := strings.Cut(comment, digestMark)
	return d, ok, nil
}

func (k *Netlink) SetPolicy(rs *Ruleset) error {
	opts := []nftables.ConnOption{nftables.WithSockOptions(largeBuffers)}
	if k.ns >= 0 {
		opts = append(opts, nftables.WithNetNSFd(int(k.ns)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: rs.Table, Family: nftables.TableFamilyIPv4}
	if _, err := c.ListTableOfFamily(rs.Table, nftables.TableFamilyIPv4); err == nil {
		c.DelTable(t)
	} else if !errors.Is(err, unix.ENOENT) {
		return err
	}
	c.AddTable(t)
	accept := nftables.ChainPolicyAccept
	base := c.AddChain(&nftables.Chain{
		Name: ChainForward, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	})
	chains := map[string]*nftables.Chain{}
	for _, pc := range rs.Chains {
		chains[pc.Name] = c.AddChain(&nftables.Chain{Name: pc.Name, Table: t})
	}
	sets := map[string]*nftables.Set{}
	for _, as := range rs.Sets {
		s, err := addSet(c, t, as)
		if err != nil {
			return fmt.Errorf("set %s: %w", as.Name, err)
		}
		sets[as.Name] = s
	}
	local, err := addLocalMap(c, t, rs.Local)
	if err != nil {
		return fmt.Errorf("map %s: %w", SetLocal, err)
	}
	addBaseRules(c, t, base, sets[SetGateways], local, rs.Digest())
	for _, pc := range rs.Chains {
		for _, r := range pc.Rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: chains[pc.Name], Exprs: ruleExprs(rs, sets, r),
				UserData: userdata.AppendString(nil, userdata.TypeComment, clipComment(r.Comment))})
		}
	}
	// One transaction: the old table and the new one swap at once.
	return c.Flush()
}

// batchBuffer bounds one transaction: a ruleset of 10,000 addresses and
// 1,000 policies is about a megabyte, and an acknowledgement comes back
// for each of its messages.
const batchBuffer = 64 << 20

// largeBuffers lets one transaction be as large as batchBuffer: the whole
// ruleset goes in one sendmsg, which the socket's default send buffer
// (net.core.wmem_default) refuses past a few hundred kilobytes. As root
// the buffers are forced past the sysctl limits, as nft does.
func largeBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, batchBuffer); e != nil {
				serr = e
			}
		}
	})
	if serr != nil {
		// Not root (CAP_NET_ADMIN without the force): the sysctl limits.
		_ = c.SetWriteBuffer(batchBuffer)
		_ = c.SetReadBuffer(batchBuffer)
	}
	return err
}

// addSet adds an address set with its elements, in chunks.
func addSet(c *nftables.Conn, t *nftables.Table, as AddrSet) (*nftables.Set, error) {
	s := &nftables.Set{Table: t, Name: as.Name, KeyType: nftables.TypeIPAddr, Interval: as.Interval}
	if err := c.AddSet(s, nil); err != nil {
		return nil, err
	}
	var elems []nftables.SetElement
	for _, r := range as.Ranges {
		elems = append(elems, nftables.SetElement{Key: r.Lo.AsSlice()})
		if as.Interval {
			// An interval ends at the address after it; the last
			// address of all has none and ends with the space.
			if end := r.Hi.Next(); end.IsValid() && end.Is4() {
				elems = append(elems, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
			}
		}
	}
	return s, addElements(c, s, elems)
}

// addLocalMap adds the verdict map of the local replicas to their chains.
func addLocalMap(c *nftables.Conn, t *nftables.Table, local []LocalReplica) (*nftables.Set, error) {
	s := &nftables.Set{Table: t, Name: SetLocal, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	if err := c.AddSet(s, nil); err != nil {
		return nil, err
	}
	elems := make([]nftables.SetElement, 0, len(local))
	for _, l := range local {
		elems = append(elems, nftables.SetElement{Key: l.Addr.AsSlice(), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: l.Chain}})
	}
	return s, addElements(c, s, elems)
}

func addElements(c *nftables.Conn, s *nftables.Set, elems []nftables.SetElement) error {
	for len(elems) > 0 {
		n := min(len(elems), elementChunk)
		// An interval's end goes with its start.
		if n < len(elems) && elems[n].IntervalEnd {
			n++
		}
		if err := c.SetAddElements(s, elems[:n]); err != nil {
			return err
		}
		elems = elems[n:]
	}
	return nil
}

// addBaseRules adds the forward chain's rules (baseRules), the first
// recording digest.
func addBaseRules(c *nftables.Conn, t *nftables.Table, base *nftables.Chain, gateways, local *nftables.Set, digest string) {
	state := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	rules := [][]expr.Any{
		{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: state, Xor: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		},
		{
			saddr(),
			&expr.Lookup{SourceRegister: 1, SetName: gateways.Name, SetID: gateways.ID},
			&expr.Verdict{Kind: expr.VerdictAccept},
		},
		{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: local.Name, SetID: local.ID, IsDestRegSet: true, DestRegister: 0},
		},
	}
	for i, e := range rules {
		comment := baseRules[i]
		if i == 0 {
			comment += "; " + digestMark + digest
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: base, Exprs: e, UserData: userdata.AppendString(nil, userdata.TypeComment, comment)})
	}
}

// maxComment is the longest comment the kernel keeps with a rule
// (NFT_USERDATA_MAXLEN, with the string's NUL): a longer one is ERANGE.
const maxComment = 255

// clipComment cuts c to maxComment bytes, at a rune boundary.
func clipComment(c string) string {
	if len(c) <= maxComment {
		return c
	}
	c = c[:maxComment-3]
	for !utf8.ValidString(c) {
		c = c[:len(c)-1]
	}
	return c + "..."
}

// saddr loads the source address into register 1.
func saddr() *expr.Payload {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
}

// inSubnet compares the source address, masked, with the cluster CIDR.
func inSubnet(rs *Ruleset, op expr.CmpOp) []expr.Any {
	return []expr.Any{
		saddr(),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: net.CIDRMask(rs.Subnet.Bits(), 32), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: op, Register: 1, Data: rs.Subnet.Addr().AsSlice()},
	}
}

// ruleExprs are one PolicyRule's expressions.
func ruleExprs(rs *Ruleset, sets map[string]*nftables.Set, r PolicyRule) []expr.Any {
	var out []expr.Any
	if r.ForeignTenant != "" {
		s := sets[r.ForeignTenant]
		out = append(out, inSubnet(rs, expr.CmpOpEq)...)
		out = append(out, saddr(), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, Invert: true})
	}
	if r.OutsideCluster {
		out = append(out, inSubnet(rs, expr.CmpOpNeq)...)
	}
	if r.SrcSet != "" {
		s := sets[r.SrcSet]
		out = append(out, saddr(), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID})
	}
	if r.Proto != "" {
		proto := byte(unix.IPPROTO_TCP)
		if r.Proto == "udp" {
			proto = unix.IPPROTO_UDP
		}
		out = append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Range{Op: expr.CmpOpEq, Register: 1,
				FromData: binaryutil.BigEndian.PutUint16(uint16(r.PortLo)), ToData: binaryutil.BigEndian.PutUint16(uint16(r.PortHi))})
	}
	v := expr.VerdictAccept
	if r.Verdict == VerdictDrop {
		v = expr.VerdictDrop
	}
	return append(out, &expr.Verdict{Kind: v})
}

const bridgeFilterPath = "/proc/sys/net/bridge/bridge-nf-call-iptables"

func (k *Netlink) BridgeFilter() (bool, error) {
	var on bool
	err := k.inNS(func() error {
		b, err := os.ReadFile(bridgeFilterPath)
		on = strings.TrimSpace(string(b)) == "1"
		return err
	})
	return on, err
}

func (k *Netlink) EnableBridgeFilter() error {
	return k.inNS(func() error { return os.WriteFile(bridgeFilterPath, []byte("1\n"), 0o644) })
}
