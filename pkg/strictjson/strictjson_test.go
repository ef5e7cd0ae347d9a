package strictjson

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestObjectRefusesAmbiguousJSON(t *testing.T) {
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":1} {}`, `[]`, `"x"`, `{"a":1`, ``, `{"a":1}x`} {
		_, err := Object([]byte(bad))
		assert.Error(t, err, bad)
	}
	m, err := Object([]byte(` {"a":1,"b":{"a":2}} `))
	require.NoError(t, err)
	assert.Len(t, m, 2)
}

func TestStringIsAJSONStringOnly(t *testing.T) {
	for raw, want := range map[string]bool{`"x"`: true, `""`: true, `null`: false, ``: false, `1`: false, `["x"]`: false} {
		_, ok := String([]byte(raw))
		assert.Equal(t, want, ok, raw)
	}
}
