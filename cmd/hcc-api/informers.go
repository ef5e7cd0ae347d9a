package main

import (
	"context"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/api"
	"github.com/clerum/hcc/pkg/config"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	informers "github.com/clerum/hcc/pkg/generated/informers/externalversions"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/names"
)

// informersCheck is the readiness check that passes once every cache has
// synced; until then the API routes answer 503.
const informersCheck = "informers"

// factory is what caches needs of the generated and the client-go
// informer factories.
type factory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// caches are hcc-api's informers: McpServers and Contexts in the MCP
// server namespace, Hosts in the host namespace, Secrets in the MCP server
// namespace, and nothing else. Each factory is namespace-scoped, so the
// service account needs no cluster-wide read.
type caches struct {
	sources api.Sources
	// inventory is kept exact by the MCP server namespace's informers.
	inventory *api.InventoryCache
	factories []factory
	// synced is in a fixed order so that logs and metrics are stable.
	synced []namedSync
}

type namedSync struct {
	name     string
	informer cache.SharedIndexInformer
}

func newCaches(kube kubernetes.Interface, hcc clientset.Interface, ns config.Namespaces, metrics *api.Metrics) (*caches, error) {
	serverFactory := informers.NewSharedInformerFactoryWithOptions(hcc, 0,
		informers.WithNamespace(ns.McpServer), informers.WithTransform(stripManagedFields))
	hostFactory := informers.NewSharedInformerFactoryWithOptions(hcc, 0,
		informers.WithNamespace(ns.Host), informers.WithTransform(stripManagedFields))
	secretFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0,
		kubeinformers.WithNamespace(ns.McpServer), kubeinformers.WithTransform(secretDataOnly))

	servers := serverFactory.Clerum().V1alpha1().McpServers()
	contexts := serverFactory.Clerum().V1alpha1().Contexts()
	hosts := hostFactory.Clerum().V1alpha1().Hosts()
	secrets := secretFactory.Core().V1().Secrets()
	inventory, err := api.NewInventoryCache(servers.Informer(), contexts.Informer(), secrets.Informer())
	if err != nil {
		return nil, err
	}
	c := &caches{
		sources: api.Sources{
			McpServers: servers.Lister().McpServers(ns.McpServer),
			Contexts:   contexts.Lister().Contexts(ns.McpServer),
			Hosts:      hosts.Lister().Hosts(ns.Host),
			Secrets:    secrets.Lister().Secrets(ns.McpServer),
		},
		inventory: inventory,
		factories: []factory{serverFactory, hostFactory, secretFactory},
		// Requesting each Informer here registers it with its factory
		// before Start, which starts only registered informers.
		synced: []namedSync{
			{"mcpservers", servers.Informer()},
			{"contexts", contexts.Informer()},
			{"hosts", hosts.Informer()},
			{"secrets", secrets.Informer()},
		},
	}
	for _, s := range c.synced {
		if _, err := s.informer.AddEventHandler(countEvents(metrics, s.name)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// countEvents counts the objects an informer delivers
// (clerum_hcc_api_informer_events_total), so that the updates reaching
// hcc-api can be told from the updates written.
func countEvents(metrics *api.Metrics, informer string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { metrics.InformerEvent(informer, "add") },
		UpdateFunc: func(any, any) { metrics.InformerEvent(informer, "update") },
		DeleteFunc: func(any) { metrics.InformerEvent(informer, "delete") },
	}
}

// run starts the informers, which stop when ctx ends, and marks readiness
// once all have synced. It returns at once.
func (c *caches) run(ctx context.Context, readiness *health.Readiness, metrics *api.Metrics, log zerolog.Logger) {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	all := make([]cache.InformerSynced, 0, len(c.synced))
	for _, s := range c.synced {
		metrics.SetCacheSynced(s.name, false)
		all = append(all, s.informer.HasSynced)
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
				metrics.SetCacheSynced(s.name, true)
			}
		}()
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), all...) {
			readiness.Set(informersCheck, true)
			log.Info().Msg("informer caches synced; serving")
		}
	}()
}

// shutdown waits for the informers to stop after ctx passed to run ended.
func (c *caches) shutdown() {
	for _, f := range c.factories {
		f.Shutdown()
	}
}

// stripManagedFields drops metadata.managedFields, which no handler reads
// and which is often the largest part of an object, and the annotation in
// which kubectl apply keeps a whole copy of the object. Informers call it
// on objects nobody else holds yet, so it may mutate them in place.
func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
	}
	return obj, nil
}

// secretDataOnly keeps of a Secret its identity, type, HCC's managed-by
// label and data only: the handlers read data[key], the revision is keyed
// by the UID, and the type and label say whether a server may name the
// Secret at all (names.ForbiddenSecret). Other labels, annotations (a
// last-applied annotation holds the whole Secret again) and managedFields
// are dropped; stringData never comes from the API server.
func secretDataOnly(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	out := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            s.Name,
			Namespace:       s.Namespace,
			UID:             s.UID,
			ResourceVersion: s.ResourceVersion,
		},
		Type: s.Type,
		Data: s.Data,
	}
	if v, ok := s.Labels[names.LabelManagedBy]; ok {
		out.Labels = map[string]string{names.LabelManagedBy: v}
	}
	return out, nil
}
