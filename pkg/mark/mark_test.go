package mark

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAMarkVerifiesOnlyItsOwnFieldsUnderItsOwnKey(t *testing.T) {
	k := NewKey("s3cret", PurposeRuntimeToken)
	m := k.Sign("uid-1", "2026-12-02T00:00:00Z", "abc")
	assert.True(t, k.Verify(m, "uid-1", "2026-12-02T00:00:00Z", "abc"))

	assert.False(t, k.Verify(m, "uid-2", "2026-12-02T00:00:00Z", "abc"), "another UID")
	assert.False(t, k.Verify(m, "uid-1", "2099-12-02T00:00:00Z", "abc"), "another expiry")
	assert.False(t, k.Verify(m, "uid-1", "2026-12-02T00:00:00Z", "abd"), "another credential")
	assert.False(t, k.Verify(m, "uid-1", "2026-12-02T00:00:00Z"), "a field fewer")
	assert.False(t, NewKey("other", PurposeRuntimeToken).Verify(m, "uid-1", "2026-12-02T00:00:00Z", "abc"), "another secret")
	assert.False(t, NewKey("s3cret", PurposeSeedJob).Verify(m, "uid-1", "2026-12-02T00:00:00Z", "abc"), "another purpose")
	assert.False(t, NewKey("s3cret", PurposeClaim).Verify(m, "uid-1", "2026-12-02T00:00:00Z", "abc"), "the claim purpose")
}

func TestFieldBoundariesAreBound(t *testing.T) {
	k := NewKey("s3cret", PurposeSeedJob)
	assert.NotEqual(t, k.Sign("ab", "c"), k.Sign("a", "bc"))
	assert.NotEqual(t, k.Sign("a", ""), k.Sign("a"))
}

func TestTheZeroKeyFailsClosed(t *testing.T) {
	var zero Key
	assert.False(t, zero.Usable())
	assert.Empty(t, zero.Sign("x"))
	assert.False(t, zero.Verify("", "x"), "an empty mark never verifies, even under the zero key")
	assert.False(t, NewKey("", PurposeSeedJob).Usable())
	k := NewKey("s3cret", PurposeSeedJob)
	assert.False(t, k.Verify("", "x"))
	assert.False(t, k.Verify("v1:00", "x"))
}
