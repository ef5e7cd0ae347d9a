package health

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

// TestHealthBody: /health answers 200 with exactly the documented body
// (docs/http-api.md), the readiness verdict in it, whether ready or not.
func TestHealthBody(t *testing.T) {
	r := NewReadiness("caches")
	mux := http.NewServeMux()
	Register(mux, r, prometheus.NewRegistry())
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
		return rec
	}

	rec := get()
	assert.Equal(t, http.StatusOK, rec.Code, "alive while not ready")
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, `{"status":"ok","ready":false}`+"\n", rec.Body.String())

	r.Set("caches", true)
	rec = get()
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, `{"status":"ok","ready":true}`+"\n", rec.Body.String())
}
