//go:build integration

package e2e

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is a DNS server on a loopback UDP port that answers A queries
// for the names it was given and NXDOMAIN for every other name. The
// controller asks it through HCC_EXTERNAL_EGRESS_DNS_SERVER.
type dnsServer struct {
	addr    string
	answers map[string]netip.Addr // absolute name ("api.example.com.") to address
	queries sync.Map              // name to *atomic.Int64
}

func startDNS(t *testing.T, answers map[string]string) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	s := &dnsServer{addr: conn.LocalAddr().String(), answers: map[string]netip.Addr{}}
	for name, ip := range answers {
		s.answers[strings.TrimSuffix(name, ".")+"."] = netip.MustParseAddr(ip)
	}
	go s.serve(conn)
	return s
}

// Queries is how many queries for name (any type) the server has answered.
func (s *dnsServer) Queries(name string) int64 {
	n, ok := s.queries.Load(strings.TrimSuffix(name, ".") + ".")
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func (s *dnsServer) serve(conn net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		if reply, ok := s.answer(buf[:n]); ok {
			_, _ = conn.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to one query: the address for an A query of a
// known name, no records for its other types (AAAA), NXDOMAIN otherwise.
func (s *dnsServer) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	counter, _ := s.queries.LoadOrStore(name, new(atomic.Int64))
	counter.(*atomic.Int64).Add(1)

	addr, known := s.answers[name]
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if known && q.Type == dnsmessage.TypeA && addr.Is4() {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1}
		if b.AResource(rh, dnsmessage.AResource{A: addr.As4()}) != nil {
			return nil, false
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
