package dataplane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	corev1 "k8s.io/api/core/v1"
)

// The process of one pod: it runs in the pod's network namespace (a new one
// the agent created for it), answers on the pod's ports with its name, and
// takes orders on a Unix socket in the node's file system: configure its
// link, listen on more ports, change its DNS answers, and send the probes
// of the flows whose source it is. The namespaces outside the cluster (the
// "public" destinations) run the same process.

// Environment variables of a child started by this package.
const (
	// roleEnv says which part of the dataplane this process is: rolePod
	// or roleNode (the node's namespace, see node.go); unset for the
	// caller.
	roleEnv = "HCC_DATAPLANE_ROLE"
	// podConfigEnv holds a pod process's podConfig as JSON.
	podConfigEnv = "HCC_DATAPLANE_POD"

	rolePod = "pod"
)

// podConfig is what a pod process is started with.
type podConfig struct {
	// Identity is what the process answers with: "namespace/name" for a
	// pod, "external" outside the cluster.
	Identity string `json:"identity"`
	// Socket is the Unix socket it takes orders on.
	Socket string `json:"socket"`
}

// linkConfig is the configuration of the process's side of its veth pair.
type linkConfig struct {
	Name string `json:"name"`
	// Addrs are addresses to add to the link, each a /32 (POST /addrs).
	Addrs []netip.Addr `json:"addrs,omitempty"`
	// Gateway is the node's address: the default route goes through it
	// (POST /configure).
	Gateway netip.Addr `json:"gateway"`
}

// probeRequest asks a pod process to try one flow.
type probeRequest struct {
	Addr     netip.AddrPort  `json:"addr"`
	Protocol corev1.Protocol `json:"protocol"`
	Timeout  time.Duration   `json:"timeout"`
}

// Outcome is what became of one attempt.
type Outcome string

const (
	// OutcomeAnswered: the connection completed (TCP) or a reply came back
	// (UDP); Reply says who answered.
	OutcomeAnswered Outcome = "answered"
	// OutcomeTimeout: nothing came back before the deadline: the packet
	// was dropped.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeRefused: the destination answered with a reset (TCP) or a
	// port-unreachable (UDP): a packet got through, but nothing listens.
	OutcomeRefused Outcome = "refused"
	// OutcomeUnreachable: the network said there is no route.
	OutcomeUnreachable Outcome = "unreachable"
	// OutcomeError: anything else, with Error saying what.
	OutcomeError Outcome = "error"
)

// probeResult is the answer to a probeRequest.
type probeResult struct {
	Outcome Outcome `json:"outcome"`
	// Reply is the responder's greeting: its identity and the address the
	// connection reached ("" if it said nothing).
	Reply string `json:"reply,omitempty"`
	Error string `json:"error,omitempty"`
}

// MaybeRunChild runs this process as a part of the dataplane when a parent
// started it as one, and exits; otherwise it returns at once. Call it
// first in main and TestMain: the test binary and the hcc-dataplane
// command start themselves again as the node and as each pod.
func MaybeRunChild() {
	switch os.Getenv(roleEnv) {
	case "":
		return
	case rolePod:
		os.Exit(podMain())
	}
}

func podMain() int {
	var cfg podConfig
	if err := json.Unmarshal([]byte(os.Getenv(podConfigEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "dataplane pod: bad %s: %v\n", podConfigEnv, err)
		return 2
	}
	p := &podProcess{identity: cfg.Identity, listening: map[Port]bool{}, dns: map[string][]netip.Addr{}}
	l, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dataplane pod %s: %v\n", cfg.Identity, err)
		return 1
	}
	srv := &http.Server{Handler: p.handler(), ReadHeaderTimeout: 10 * time.Second}
	// The parent ends a pod with SIGKILL (its network namespace goes with
	// it); nothing here needs a clean shutdown.
	if err := srv.Serve(l); err != nil {
		fmt.Fprintf(os.Stderr, "dataplane pod %s: %v\n", cfg.Identity, err)
		return 1
	}
	return 0
}

type podProcess struct {
	identity string

	mu        sync.Mutex
	listening map[Port]bool
	// dns answers A queries on UDP port 53 when not empty: absolute names
	// ("api.example.com.") to addresses.
	dns map[string][]netip.Addr
}

func (p *podProcess) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(p.identity)) })
	mux.HandleFunc("POST /configure", func(w http.ResponseWriter, r *http.Request) {
		var link linkConfig
		if !decode(w, r, &link) {
			return
		}
		reply(w, configureLink(link))
	})
	mux.HandleFunc("POST /addrs", func(w http.ResponseWriter, r *http.Request) {
		var link linkConfig
		if !decode(w, r, &link) {
			return
		}
		reply(w, addAddrs(link))
	})
	mux.HandleFunc("POST /listen", func(w http.ResponseWriter, r *http.Request) {
		var ports []Port
		if !decode(w, r, &ports) {
			return
		}
		reply(w, p.listen(ports))
	})
	mux.HandleFunc("PUT /dns", func(w http.ResponseWriter, r *http.Request) {
		var answers map[string][]netip.Addr
		if !decode(w, r, &answers) {
			return
		}
		p.mu.Lock()
		p.dns = map[string][]netip.Addr{}
		for name, addrs := range answers {
			p.dns[strings.ToLower(strings.TrimSuffix(name, "."))+"."] = addrs
		}
		p.mu.Unlock()
		reply(w, nil)
	})
	mux.HandleFunc("POST /probe", func(w http.ResponseWriter, r *http.Request) {
		var req probeRequest
		if !decode(w, r, &req) {
			return
		}
		res := attempt(r.Context(), req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
	return mux
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// configureLink brings up loopback and the process's end of the veth pair,
// and routes everything through the node.
func configureLink(link linkConfig) error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "set", link.Name, "up"},
		// The node's address is the gateway: the node answers ARP for it
		// on the veth, being one of its own addresses.
		{"route", "add", link.Gateway.String() + "/32", "dev", link.Name, "scope", "link"},
		{"route", "add", "default", "via", link.Gateway.String(), "dev", link.Name},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// addAddrs puts addresses on the link, each a /32.
func addAddrs(link linkConfig) error {
	for _, addr := range link.Addrs {
		if err := ip("addr", "add", addr.String()+"/32", "dev", link.Name); err != nil {
			return err
		}
	}
	return nil
}

// ip runs the ip command (iproute2) with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// listen starts answering on ports it does not answer on yet.
func (p *podProcess) listen(ports []Port) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, port := range ports {
		if p.listening[port] {
			continue
		}
		addr := fmt.Sprintf(":%d", port.Port)
		switch port.Protocol {
		case corev1.ProtocolTCP:
			l, err := net.Listen("tcp4", addr)
			if err != nil {
				return fmt.Errorf("listen %s: %w", port, err)
			}
			go p.serveTCP(l)
		case corev1.ProtocolUDP:
			conn, err := net.ListenPacket("udp4", addr)
			if err != nil {
				return fmt.Errorf("listen %s: %w", port, err)
			}
			go p.serveUDP(conn, port.Port)
		default:
			return fmt.Errorf("listen %s: unknown protocol", port)
		}
		p.listening[port] = true
	}
	return nil
}

// greeting is what the responder says: its identity and the address the
// connection reached, so a prober can tell which pod (and which of an
// outside namespace's addresses) answered.
func (p *podProcess) greeting(local net.Addr) string {
	host, _, _ := net.SplitHostPort(local.String())
	return p.identity + " " + host
}

func (p *podProcess) serveTCP(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = fmt.Fprintf(conn, "%s\n", p.greeting(conn.LocalAddr()))
		}()
	}
}

// serveUDP answers each datagram with the greeting followed by the
// datagram's own text (the prober's nonce). On port 53 a datagram that
// parses as a DNS query gets a DNS answer instead, when the process has
// DNS answers.
func (p *podProcess) serveUDP(conn net.PacketConn, port int32) {
	// The reply must leave from the address the datagram reached (an
	// outside namespace has several), which a socket bound to the
	// wildcard address learns only from the datagram's packet info.
	pc := ipv4.NewPacketConn(conn)
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		fmt.Fprintf(os.Stderr, "dataplane pod %s: packet info: %v\n", p.identity, err)
		return
	}
	buf := make([]byte, 1500)
	for {
		n, cm, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var out []byte
		if port == 53 {
			out = p.answerDNS(buf[:n])
		}
		var src net.IP
		if cm != nil {
			src = cm.Dst
		}
		if out == nil {
			out = fmt.Appendf(nil, "%s %s %s\n", p.identity, src, strings.TrimSpace(string(buf[:n])))
		}
		_, _ = pc.WriteTo(out, &ipv4.ControlMessage{Src: src}, from)
	}
}

func (p *podProcess) answerDNS(query []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dns) == 0 {
		return nil
	}
	return dnsAnswer(query, p.dns)
}

// attempt tries one flow from this process's namespace.
func attempt(ctx context.Context, req probeRequest) probeResult {
	if req.Timeout <= 0 {
		req.Timeout = time.Second
	}
	switch req.Protocol {
	case corev1.ProtocolUDP:
		return attemptUDP(req)
	default:
		return attemptTCP(ctx, req)
	}
}

func attemptTCP(ctx context.Context, req probeRequest) probeResult {
	d := net.Dialer{Timeout: req.Timeout}
	conn, err := d.DialContext(ctx, "tcp4", req.Addr.String())
	if err != nil {
		return classify(err)
	}
	defer conn.Close()
	// The connection is complete: whoever answers, the packets passed. The
	// greeting says who it was; a destination that says nothing (the API
	// server, which waits for the client) leaves Reply empty.
	_ = conn.SetReadDeadline(time.Now().Add(req.Timeout))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return probeResult{Outcome: OutcomeAnswered, Reply: strings.TrimSpace(line)}
}

func attemptUDP(req probeRequest) probeResult {
	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(req.Addr))
	if err != nil {
		return classify(err)
	}
	defer conn.Close()
	nonce := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	if _, err := conn.Write([]byte(nonce)); err != nil {
		return classify(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(req.Timeout))
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return classify(err)
		}
		// A late answer to an earlier probe from this port is not ours.
		text := strings.TrimSpace(string(buf[:n]))
		if reply, ok := strings.CutSuffix(text, " "+nonce); ok {
			return probeResult{Outcome: OutcomeAnswered, Reply: reply}
		}
	}
}

// classify maps a failed dial, write or read to an outcome.
func classify(err error) probeResult {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return probeResult{Outcome: OutcomeTimeout}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return probeResult{Outcome: OutcomeRefused, Error: err.Error()}
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return probeResult{Outcome: OutcomeUnreachable, Error: err.Error()}
	default:
		return probeResult{Outcome: OutcomeError, Error: err.Error()}
	}
}
