package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/clerum/hcc/pkg/leaderfence"
)

// The reconcilers' clients are fenced and name the replica; the
// leader-election client is neither fenced (it keeps the fence open) nor
// changed by building the others.
func TestOnlyTheReconcilersClientsAreFenced(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.Method+" "+r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()
	restCfg := &rest.Config{Host: srv.URL, UserAgent: "hcc-controller/test"}
	fence := leaderfence.New(clocktesting.NewFakeClock(time.Now()), 15*time.Second, zerolog.Nop())

	ctrl := kubernetes.NewForConfigOrDie(controllerConfig(restCfg, "replica-a", fence))
	le := kubernetes.NewForConfigOrDie(leaderElectionConfig(restCfg, "replica-a"))
	assert.Equal(t, "hcc-controller/test", restCfg.UserAgent, "restCfg is not changed")
	assert.Nil(t, restCfg.WrapTransport)

	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	_, err := ctrl.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{})
	require.ErrorIs(t, err, leaderfence.ErrLeaseStale, "the fence is closed until the lease is acquired")
	_, err = ctrl.CoreV1().ConfigMaps("ns").Get(ctx, "x", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = le.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)

	assert.Equal(t, []string{"GET hcc-controller/test/replica-a", "POST hcc-controller/test/replica-a/leader-election"}, agents)
}
