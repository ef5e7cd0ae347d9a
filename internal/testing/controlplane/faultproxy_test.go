package controlplane

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunked reads back its chunks one Read at a time, as a watch stream
// arrives.
type chunked struct{ chunks []string }

func (c *chunked) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func (c *chunked) Close() error { return nil }

// The scanner counts kube-apiserver's two wordings of a watch's 410 —
// the watch cache's and etcd's — once each, wherever the reads split
// them, and nothing else.
func TestTooOldScannerCountsBothWordingsOnce(t *testing.T) {
	cache := `{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version: 5 (9)"}}`
	storage := `{"type":"ERROR","object":{"kind":"Status","code":410,"message":"The resourceVersion for the provided watch is too old."}}`
	other := `{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"too-old","annotations":{"old":"resource version"}}}}`
	stream := other + cache + storage + other + storage
	for _, size := range []int{1, 7, 23, 24, 25, 52, 53, 54, 100, len(stream)} {
		var chunks []string
		for s := stream; s != ""; {
			n := min(size, len(s))
			chunks = append(chunks, s[:n])
			s = s[n:]
		}
		var seen atomic.Int64
		_, err := io.Copy(io.Discard, &tooOldScanner{ReadCloser: &chunked{chunks: chunks}, seen: &seen})
		require.NoError(t, err)
		assert.Equal(t, int64(3), seen.Load(), "reads of %d bytes", size)
	}
}

// An informer is its watched path and selectors; the resourceVersion and
// timeouts of one request do not matter.
func TestWatchKeyNamesTheInformer(t *testing.T) {
	req := func(uri string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, "http://proxy"+uri, nil)
		require.NoError(t, err)
		return r
	}
	first := watchKey(req("/api/v1/namespaces/a/pods?labelSelector=x%3Dy&resourceVersion=5&sendInitialEvents=true&timeoutSeconds=300&watch=true"))
	again := watchKey(req("/api/v1/namespaces/a/pods?labelSelector=x%3Dy&resourceVersion=9&sendInitialEvents=true&timeoutSeconds=411&watch=true"))
	assert.Equal(t, first, again)
	assert.True(t, strings.HasPrefix(first, "/api/v1/namespaces/a/pods?"), first)
	assert.NotEqual(t, first, watchKey(req("/api/v1/namespaces/a/pods?labelSelector=x%3Dz&watch=true")))
	assert.NotEqual(t, first, watchKey(req("/api/v1/namespaces/b/pods?labelSelector=x%3Dy&watch=true")))
	assert.NotEqual(t, first, watchKey(req("/api/v1/namespaces/a/pods?labelSelector=x%3Dy&fieldSelector=metadata.name%3Dp&watch=true")))
}
