package api

import (
	"encoding/json"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	listers "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
)

// DevFixtures are the objects CLERUM_MCP_SERVERS, CLERUM_CONTEXTS and
// CLERUM_MCP_AUTH describe, standing in for the cluster in dev mode. They
// back the v1 inventory only: the v2 routes need a live Host, which dev
// mode cannot provide, so they fail closed and the auth tokens are never
// served.
type DevFixtures struct {
	namespace string
	servers   []*v1alpha1.McpServer
	contexts  []*v1alpha1.Context
	// urls are the fixtures' transport.url values by server name; the v1
	// inventory prefers them to the in-cluster URL, since dev servers run
	// wherever the developer started them.
	urls map[string]string
}

// devServer is the fixture shape of docs/http-api.md (dev mode): {name,
// spec{..., transport{type, url, port}}}. The spec decodes as an McpServerSpec; transport.url, which
// McpServerSpec lacks, is decoded on the side.
type devServer struct {
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec"`
}

type devTransportURL struct {
	Transport struct {
		URL string `json:"url"`
	} `json:"transport"`
}

type devContext struct {
	Name string               `json:"name"`
	Spec v1alpha1.ContextSpec `json:"spec"`
}

// LoadDevFixtures parses the dev-mode variables. A variable that does not
// parse is logged and taken as empty; it never stops the process (see
// docs/http-api.md, dev mode). Fixture objects live in namespace, the MCP server
// namespace.
func LoadDevFixtures(dev config.Dev, namespace string, log zerolog.Logger) *DevFixtures {
	f := &DevFixtures{namespace: namespace, urls: map[string]string{}}

	for _, d := range decodeFixture[[]devServer](log, "CLERUM_MCP_SERVERS", dev.McpServersJSON) {
		var spec v1alpha1.McpServerSpec
		var extra devTransportURL
		if d.Name == "" || json.Unmarshal(d.Spec, &spec) != nil || json.Unmarshal(d.Spec, &extra) != nil {
			log.Error().Str("variable", "CLERUM_MCP_SERVERS").Str("server", d.Name).Msg("skipping a server fixture without a name or a valid spec")
			continue
		}
		f.servers = append(f.servers, &v1alpha1.McpServer{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: namespace},
			Spec:       spec,
			// Dev servers are run by the developer, not reconciled: report
			// them as deployed and ready so local pollers use them.
			Status: v1alpha1.McpServerStatus{Deployed: true, Ready: true},
		})
		if extra.Transport.URL != "" {
			f.urls[d.Name] = extra.Transport.URL
		}
	}

	for _, d := range decodeFixture[[]devContext](log, "CLERUM_CONTEXTS", dev.ContextsJSON) {
		f.contexts = append(f.contexts, &v1alpha1.Context{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: namespace},
			Spec:       d.Spec,
		})
	}

	auth := decodeFixture[map[string]string](log, "CLERUM_MCP_AUTH", dev.McpAuthJSON)

	log.Info().Int("servers", len(f.servers)).Int("contexts", len(f.contexts)).Int("authEntries", len(auth)).
		Msg("dev mode: fixtures loaded; v1 inventory serves them, v2 routes fail closed without live Host authority")
	return f
}

// decodeFixture decodes raw, or returns the zero value (never a partial
// decode) when raw is empty or does not decode.
func decodeFixture[T any](log zerolog.Logger, variable, raw string) T {
	var v T
	if raw == "" {
		return v
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		log.Error().Err(err).Str("variable", variable).Msg("dev fixture is not valid JSON; using an empty value")
		var empty T
		return empty
	}
	return v
}

// sources serves the fixtures through the same readers the cluster caches
// implement. There are never Hosts or Secrets.
func (f *DevFixtures) sources() Sources {
	servers := newIndexer()
	for _, s := range f.servers {
		_ = servers.Add(s)
	}
	contexts := newIndexer()
	for _, c := range f.contexts {
		_ = contexts.Add(c)
	}
	return Sources{
		McpServers: listers.NewMcpServerLister(servers).McpServers(f.namespace),
		Contexts:   listers.NewContextLister(contexts).Contexts(f.namespace),
		Hosts:      listers.NewHostLister(newIndexer()).Hosts(f.namespace),
		Secrets:    corelisters.NewSecretLister(newIndexer()).Secrets(f.namespace),
	}
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}
