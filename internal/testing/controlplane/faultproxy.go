package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FaultProxy is a reverse proxy in front of kube-apiserver that fails a
// share of requests as an overloaded API server would, and watches the
// watch streams it carries for "too old resource version". A client
// reaches it over plain HTTP through WriteKubeconfig; it forwards as the
// admin, passing the client's impersonation headers on, so the API server
// (and its audit log) sees the impersonated user.
type FaultProxy struct {
	url      string
	srv      *http.Server
	failBits atomic.Uint64 // math.Float64bits of the share failed
	// writeDelay holds each write back this long (SetWriteDelay),
	// answerDelay each write's answer (SetAnswerDelay).
	writeDelay, answerDelay atomic.Int64
	// Failed counts the requests answered 429 and 500 by the proxy.
	failed429, failed500 atomic.Int64
	tooOld               atomic.Int64
	mu                   sync.Mutex
	// relists counts the watch-list requests, by informer (watchKey).
	relists map[string]int64
	// watches are the watch requests in flight, for CloseWatches.
	watches map[*watchStream]struct{}
	dir     string
}

// watchStream is a watch request the proxy is carrying.
type watchStream struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartFaultProxy starts a FaultProxy failing nothing; Close stops it.
func (c *ControlPlane) StartFaultProxy() (*FaultProxy, error) {
	target, err := url.Parse(c.url())
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(c.Config())
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{url: "http://" + l.Addr().String(), dir: c.dir, relists: map[string]int64{}, watches: map[*watchStream]struct{}{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream: flush every write
	rp.ModifyResponse = func(resp *http.Response) error {
		if isWatch(resp.Request) {
			resp.Body = &tooOldScanner{ReadCloser: resp.Body, seen: &p.tooOld}
		}
		return nil
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWatch(r) {
			ctx, cancel := context.WithCancel(r.Context())
			ws := &watchStream{cancel: cancel, done: make(chan struct{})}
			p.mu.Lock()
			if r.URL.Query().Get("sendInitialEvents") == "true" {
				p.relists[watchKey(r)]++
			}
			p.watches[ws] = struct{}{}
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				delete(p.watches, ws)
				p.mu.Unlock()
				cancel()
				close(ws.done)
			}()
			r = r.WithContext(ctx)
		}
		if !isWatch(r) && rand.Float64() < p.failure() {
			p.fail(w)
			return
		}
		if d := time.Duration(p.answerDelay.Load()); d > 0 && isDelayedWrite(r) {
			// Applied at once, answered late: the client cannot tell.
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
			time.Sleep(d)
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		if d := time.Duration(p.writeDelay.Load()); d > 0 && isDelayedWrite(r) {
			// A write the API server already has in hand: the client
			// giving up does not stop it.
			time.Sleep(d)
			r = r.WithContext(context.WithoutCancel(r.Context()))
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// URL is the proxy's address.
func (p *FaultProxy) URL() string { return p.url }

// SetFailure makes the proxy fail share (0 to 1) of the requests that are
// not watches, half with 429 and a Retry-After of one second, half with
// 500; watches always pass.
func (p *FaultProxy) SetFailure(share float64) { p.failBits.Store(math.Float64bits(share)) }

func (p *FaultProxy) failure() float64 { return math.Float64frombits(p.failBits.Load()) }

// SetWriteDelay makes the proxy hold every write (POST, PUT, PATCH,
// DELETE) but a Lease's for d before forwarding it, and forward it even if
// the client has given up meanwhile, as a slow API server still applies a
// write whose client went away; 0 forwards at once. Leases pass at once, so
// leader election keeps its timings.
func (p *FaultProxy) SetWriteDelay(d time.Duration) { p.writeDelay.Store(int64(d)) }

// SetAnswerDelay makes the proxy forward every write but a Lease's at once
// and hold its answer for d, so the write is applied while its client still
// waits; 0 answers at once.
func (p *FaultProxy) SetAnswerDelay(d time.Duration) { p.answerDelay.Store(int64(d)) }

func isDelayedWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return !strings.Contains(r.URL.Path, "/apis/coordination.k8s.io/")
	}
	return false
}

// Failed returns how many requests the proxy answered 429 and 500.
func (p *FaultProxy) Failed() (tooMany, internal int64) {
	return p.failed429.Load(), p.failed500.Load()
}

// TooOld returns how many watch responses refused a resourceVersion as
// too old (410 Gone): each is an informer told to relist.
func (p *FaultProxy) TooOld() int64 { return p.tooOld.Load() }

// Relists returns, for each informer — a watched path and its selectors —
// how many lists the proxy carried for it as watch-list requests
// (sendInitialEvents=true), the way client-go's informers list: at start,
// after a 410, and when a broken watch fails in a way client-go does not
// retry (it then relists at once, with no 410). A list counts when it is
// asked for (the bookmark ending one did not reliably show in the stream
// within a minute of a kube-apiserver restart).
func (p *FaultProxy) Relists() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.relists)
}

// OpenWatches returns how many watches the proxy is carrying.
func (p *FaultProxy) OpenWatches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.watches)
}

// CloseWatches ends every watch the proxy is carrying and returns once
// none can deliver another byte: a client frozen meanwhile (SIGSTOP)
// then misses whatever happens until it watches again, as when a node
// loses its network, instead of finding it in its socket's buffer.
func (p *FaultProxy) CloseWatches(ctx context.Context) error {
	p.mu.Lock()
	streams := slices.Collect(maps.Keys(p.watches))
	p.mu.Unlock()
	for _, ws := range streams {
		ws.cancel()
	}
	for _, ws := range streams {
		select {
		case <-ws.done:
		case <-ctx.Done():
			return fmt.Errorf("closing %d watches: %w", len(streams), ctx.Err())
		}
	}
	return nil
}

// watchKey names the informer a watch request belongs to.
func watchKey(r *http.Request) string {
	q := r.URL.Query()
	return r.URL.Path + "?labelSelector=" + q.Get("labelSelector") + "&fieldSelector=" + q.Get("fieldSelector")
}

// Close stops the proxy, ending the connections it holds.
func (p *FaultProxy) Close() error { return p.srv.Close() }

// WriteKubeconfig writes a kubeconfig that reaches the API server through
// the proxy as user in groups, and returns its path.
func (p *FaultProxy) WriteKubeconfig(user string, groups ...string) (string, error) {
	const name = "hcc-test-proxy"
	config := clientcmdapi.NewConfig()
	config.Clusters[name] = &clientcmdapi.Cluster{Server: p.url}
	config.AuthInfos[name] = &clientcmdapi.AuthInfo{Impersonate: user, ImpersonateGroups: groups}
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	config.CurrentContext = name
	path := filepath.Join(p.dir, fmt.Sprintf("kubeconfig-proxy-%s", strings.NewReplacer(":", "-", "/", "-").Replace(user)))
	return path, clientcmd.WriteToFile(*config, path)
}

// fail answers as kube-apiserver does when it sheds load (429, with
// Retry-After) or fails (500), alternately at random.
func (p *FaultProxy) fail(w http.ResponseWriter) {
	status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure}
	if rand.IntN(2) == 0 {
		p.failed429.Add(1)
		status.Code, status.Reason, status.Message = http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "fault proxy: too many requests, please try again later"
		status.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
		w.Header().Set("Retry-After", "1")
	} else {
		p.failed500.Add(1)
		status.Code, status.Reason, status.Message = http.StatusInternalServerError, metav1.StatusReasonInternalError, "fault proxy: internal error"
	}
	body, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// tooOldScanner counts the refusals of a resourceVersion as too old that
// a watch stream carries, across read boundaries.
type tooOldScanner struct {
	io.ReadCloser
	seen *atomic.Int64
	mu   sync.Mutex
	tail []byte
}

// tooOldMarkers are kube-apiserver's two wordings of 410 Gone for a watch:
// its watch cache's, and etcd's compaction error when the watch is served
// from storage.
var tooOldMarkers = [][]byte{
	[]byte("too old resource version"),
	[]byte("The resourceVersion for the provided watch is too old"),
}

// scanTail is one byte less than the longest marker: what a read keeps
// for the next, so that no marker is missed.
var scanTail = len(slices.MaxFunc(tooOldMarkers, func(a, b []byte) int { return len(a) - len(b) })) - 1

func (s *tooOldScanner) Read(b []byte) (int, error) {
	n, err := s.ReadCloser.Read(b)
	if n > 0 {
		s.mu.Lock()
		old := len(s.tail)
		buf := append(s.tail, b[:n]...)
		for _, m := range tooOldMarkers {
			s.seen.Add(int64(countNew(buf, m, old)))
		}
		keep := min(len(buf), scanTail)
		s.tail = append([]byte(nil), buf[len(buf)-keep:]...)
		s.mu.Unlock()
	}
	return n, err
}

// countNew counts the occurrences of m in buf that end past its first old
// bytes: one ending within them was counted by the read before.
func countNew(buf, m []byte, old int) int {
	c := 0
	for i := 0; ; {
		j := bytes.Index(buf[i:], m)
		if j < 0 {
			return c
		}
		if i+j+len(m) > old {
			c++
		}
		i += j + 1
	}
}
