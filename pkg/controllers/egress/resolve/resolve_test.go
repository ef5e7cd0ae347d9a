package resolve

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFailureClasses(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&net.DNSError{Err: "no such host", IsNotFound: true}, FailureNXDomain},
		{&net.DNSError{Err: "read udp 10.0.0.3:41234->10.96.0.10:53: i/o timeout", IsTimeout: true}, FailureTimeout},
		{&net.DNSError{Err: "server misbehaving", IsTemporary: true}, FailureServFail},
		{&net.DNSError{Err: "read udp 10.0.0.3:5353->10.96.0.10:53: read: connection refused"}, FailureRefused},
		{context.DeadlineExceeded, FailureTimeout},
		{errNoAddress, FailureNoAddress},
		{&privateAnswer{fmt.Errorf("address 10.0.0.5 is in 10.0.0.0/8")}, FailurePrivate},
		{fmt.Errorf("something else"), FailureUnclassified},
	}
	for _, tc := range tests {
		t.Run(tc.want+" from "+tc.err.Error(), func(t *testing.T) { assert.Equal(t, tc.want, classify(tc.err)) })
	}
}
