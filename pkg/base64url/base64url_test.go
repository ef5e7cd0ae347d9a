package base64url

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDecodeCanonical(t *testing.T) {
	// "hi" is 0x68 0x69: "aGk" with the 2 unused bits of "k" zero; "aGl"
	// to "aGn" spell the same bytes with those bits set.
	decoded, ok := DecodeCanonical("aGk")
	assert.True(t, ok)
	assert.Equal(t, []byte("hi"), decoded)
	decoded, ok = DecodeCanonical("_-8")
	assert.True(t, ok, "the URL alphabet")
	assert.Equal(t, []byte{0xff, 0xef}, decoded)

	for name, s := range map[string]string{
		"empty":                 "",
		"unused bits set (1)":   "aGl",
		"unused bits set (2)":   "aGm",
		"unused bits set (3)":   "aGn",
		"4 unused bits set":     "aB",
		"padding":               "aGk=",
		"a CR inside":           "aG\rk",
		"an LF at the end":      "aGk\n",
		"the standard alphabet": "/+8",
		"a space":               "aGk ",
		"an impossible length":  "aGkaG",
		"outside the alphabet":  "aG*k",
	} {
		t.Run(name, func(t *testing.T) {
			_, ok := DecodeCanonical(s)
			assert.False(t, ok, "%q", s)
		})
	}
}
