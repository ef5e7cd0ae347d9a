package dataplane

import (
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsAnswer builds the reply to one DNS query from answers (absolute,
// lower-case names to addresses): the IPv4 addresses for an A query of a
// known name, no records for its other types (AAAA), NXDOMAIN for any
// other name. It returns nil for a datagram that is not a query, which the
// caller then answers as any other probe.
func dnsAnswer(query []byte, answers map[string][]netip.Addr) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	addrs, known := answers[strings.ToLower(q.Name.String())]
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: h.ID, Response: true, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rcode,
	})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if q.Type == dnsmessage.TypeA {
		for _, addr := range addrs {
			if !addr.Is4() {
				continue
			}
			// A TTL of one second: an answer the test changes is seen at
			// the controller's next refresh, not a cache's expiry later.
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1}
			if b.AResource(rh, dnsmessage.AResource{A: addr.As4()}) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
