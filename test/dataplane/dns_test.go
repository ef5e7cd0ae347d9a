package dataplane

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
)

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	require.NoError(t, b.StartQuestions())
	require.NoError(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}))
	out, err := b.Finish()
	require.NoError(t, err)
	return out
}

func TestDNSAnswer(t *testing.T) {
	answers := map[string][]netip.Addr{"api.example.com.": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("93.184.216.35")}}
	var m dnsmessage.Message

	require.NoError(t, m.Unpack(dnsAnswer(query(t, "API.example.com.", dnsmessage.TypeA), answers)))
	assert.Equal(t, uint16(7), m.Header.ID)
	assert.Equal(t, dnsmessage.RCodeSuccess, m.Header.RCode)
	require.Len(t, m.Answers, 2, "every address, the name matched without regard to case")
	assert.Equal(t, [4]byte{93, 184, 216, 34}, m.Answers[0].Body.(*dnsmessage.AResource).A)

	require.NoError(t, m.Unpack(dnsAnswer(query(t, "api.example.com.", dnsmessage.TypeAAAA), answers)))
	assert.Equal(t, dnsmessage.RCodeSuccess, m.Header.RCode)
	assert.Empty(t, m.Answers, "a known name has no IPv6 addresses")

	require.NoError(t, m.Unpack(dnsAnswer(query(t, "other.example.com.", dnsmessage.TypeA), answers)))
	assert.Equal(t, dnsmessage.RCodeNameError, m.Header.RCode)

	assert.Nil(t, dnsAnswer([]byte("probe-123"), answers), "a probe is no query")
}
